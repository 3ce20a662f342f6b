"""examples/telegram_bot.py, discord_bot.py and slack_bot.py are not run against a platform in CI:
their --help works, a missing token is a usage error, and the adapter each uses imports."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BOTS = {"telegram_bot.py": ("telegram", "TELEGRAM_TOKEN"), "discord_bot.py": ("discord", "DISCORD_TOKEN"),
        "slack_bot.py": ("slack", "SLACK_BOT_TOKEN")}
LIBRARIES = {"telegram": "telegram", "discord": "discord", "slack": "slack_bolt"}


def run(example: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "DISCORD_", "SLACK_"))}
    return subprocess.run([sys.executable, str(EXAMPLES / example), *args], capture_output=True, text=True,
                          timeout=60, env=env)


@pytest.mark.parametrize("example", sorted(BOTS))
def test_the_bot_example_explains_itself_and_wants_a_token(example: str) -> None:
    helped = run(example, "--help")
    assert helped.returncode == 0 and "--db" in helped.stdout and "--account" in helped.stdout
    refused = run(example)
    assert refused.returncode == 2 and BOTS[example][1] in refused.stderr


@pytest.mark.parametrize("platform", sorted(LIBRARIES))
def test_the_adapter_imports_with_its_library(platform: str) -> None:
    pytest.importorskip(LIBRARIES[platform])
    module = importlib.import_module(f"turnlog.integrations.{platform}")
    assert module.PLATFORM == platform
