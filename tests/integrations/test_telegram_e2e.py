"""The Telegram adapter end to end: the real python-telegram-bot, in a child process, polling a
fake Bot API that the test serves on loopback (fake_bot_api.py), in front of a turnlog database.
The bot process is killed with SIGKILL where a crash matters; every wait is on the fake server's
state, a cue file or the process, each with a timeout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest

pytest.importorskip("telegram")

import turnlog  # noqa: E402
from harness.procs import child_env  # noqa: E402
from integrations.fake_bot_api import FakeBotApi  # noqa: E402

CHILD = Path(__file__).with_name("telegram_child.py")
WAIT_S = 60.0


def no_proxy(env: dict[str, str]) -> dict[str, str]:
    """Without proxy settings: httpx would send even a loopback request to a configured proxy."""
    return {k: v for k, v in env.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}


@pytest.fixture
def api() -> Iterator[FakeBotApi]:
    with FakeBotApi() as fake:
        assert urlsplit(fake.base_url).hostname == "127.0.0.1"
        yield fake


class Bot:
    """One bot process at a time on the test's database."""

    def __init__(self, db: Path, work: Path, api: FakeBotApi) -> None:
        self.db, self.work, self.api = db, work, api
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> dict[str, Any]:
        (self.work / "started.json").unlink(missing_ok=True)
        self.proc = subprocess.Popen([sys.executable, str(CHILD), str(self.db), str(self.work), self.api.base_url],
                                     env=no_proxy(child_env()), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return self.cue("started")

    def cue(self, name: str) -> dict[str, Any]:
        path = self.work / f"{name}.json"
        deadline = time.monotonic() + WAIT_S
        while not path.exists():
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"bot exited {self.proc.returncode} before {name}:\n"
                                     f"{self.proc.stderr.read().decode() if self.proc.stderr else ''}")
            assert time.monotonic() < deadline, f"the bot did not reach {name} within {WAIT_S:g}s"
            time.sleep(0.01)  # polling a file the child writes, not a synchronisation by time
        return json.loads(path.read_text())

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(WAIT_S)  # reaped: the next boot sees the pid gone
        self.proc.communicate()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # PTB's run_polling stops cleanly on SIGINT
            try:
                self.proc.wait(WAIT_S)
            except subprocess.TimeoutExpired:
                self.kill()
            self.proc.communicate()


@pytest.fixture
def bot(tmp_path: Path, api: FakeBotApi) -> Iterator[Bot]:
    one = Bot(tmp_path / "gateway.db", tmp_path, api)
    yield one
    one.stop()


def ledger_states(db: Path) -> list[str]:
    with turnlog.open(db) as t:  # writable: it catches the read models up with the bot's writes
        return [row.state for row in t.ledger()]


def test_an_update_delivered_twice_runs_one_turn(api: FakeBotApi, bot: Bot) -> None:
    bot.start()
    first = api.push(1, "hello")
    api.wait(lambda a: a.texts() == ["echo: hello"], WAIT_S, "the first reply")
    api.push_again(first)
    api.wait(lambda a: a.redelivered == 1, WAIT_S, "the redelivery to be served")
    api.push(2, "again")  # the bot handles updates in order: its reply comes after the repeat's
    api.wait(lambda a: len(a.texts()) >= 2, WAIT_S, "the second reply")
    bot.stop()
    assert api.texts() == ["echo: hello", "echo: again"]
    with turnlog.open(bot.db) as t:
        fates = t.message_fates(turnlog.SessionSource(platform="telegram", chat_id="42", user_id="42",
                                                      account_id=str(api.bot["id"])))  # the bot's own id
    assert [f.message_id for f in fates] == ["tg1001", "tg1002"]


def test_a_bot_killed_mid_turn_answers_once_after_its_restart(api: FakeBotApi, bot: Bot) -> None:
    (bot.work / "block").touch()
    bot.start()
    api.push(1, "are you there")
    blocked = bot.cue("blocked")
    assert blocked["text"] == "are you there"
    bot.kill()
    (bot.work / "block").unlink()
    boot = bot.start()["boot"]
    assert boot["previous_clean"] is False
    api.wait(lambda a: len(a.texts()) >= 1, WAIT_S, "the resumed reply")
    bot.stop()
    assert len(api.texts()) == 1
    assert api.texts()[0].endswith("echo: are you there")
    assert ledger_states(bot.db) == ["delivered"]
    with turnlog.open(bot.db) as t:  # nothing lost, nothing doubled: one question, one answer
        (session,) = t.sessions()
        messages = [(m["role"], m["content"]) for m in t.transcript(session.session_id)]
    assert [m for m in messages if m[0] != "system"] == [("user", "are you there"), ("assistant", api.texts()[0])]
    assert [m[0] for m in messages].count("system") == 1  # the resumed turn's note on what interrupted it


def test_a_send_timed_out_after_it_was_recorded_is_reconciled_not_reposted(api: FakeBotApi, bot: Bot) -> None:
    api.hang_sends(1)
    bot.start()
    api.push(1, "ping")
    api.wait(lambda a: a.texts() == ["echo: ping"], WAIT_S, "the recorded send")
    deadline = time.monotonic() + WAIT_S
    while ledger_states(bot.db) != ["unknown"]:  # the client times out after 1 s
        assert time.monotonic() < deadline, f"ledger: {ledger_states(bot.db)}"
        time.sleep(0.05)
    bot.kill()
    swept = bot.start()["swept"]
    assert len(swept["reconciled"]) == 1 and not swept["delivered"]
    api.push(2, "still there")  # a barrier: anything resent would come before this reply
    api.wait(lambda a: len(a.texts()) >= 2, WAIT_S, "the next reply")
    bot.stop()
    assert api.texts() == ["echo: ping", "echo: still there"]
    assert ledger_states(bot.db) == ["delivered", "delivered"]
