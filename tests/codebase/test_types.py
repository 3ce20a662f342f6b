"""The type checker is part of the build: the pure core is strict, the rest is checked as written."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("args", [("--strict", "turnlog/domain"), ("turnlog",)], ids=["strict-domain", "all"])
def test_mypy_reports_no_error(args: tuple[str, ...]) -> None:
    result = _mypy(*args)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout
