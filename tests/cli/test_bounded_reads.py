"""Issue 19 item 4 (CLI): `ledger --limit N` reads N rows, not the whole ledger; `diff A B --key K`
reads K's events, not every event between A and B. Counted deterministically: the events the
log reader decodes (its two decoding entry points) while the command runs."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from turnlog import ManualClock, SequentialIds, Turnlog
from turnlog.cli import main
from turnlog.domain.source import SessionSource
from turnlog.storage.log import LogReader

USERS = 12
TURNS = 4


def source(n: int, turn: int) -> SessionSource:
    s = SessionSource(platform="telegram", chat_type="dm", chat_id=str(100 + n), user_id=str(100 + n))
    s.message_id = f"m{n}-{turn}"
    return s


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    """USERS keys, TURNS turns each (each a reply owed then delivered), one /new on user 0."""
    path = str(tmp_path_factory.mktemp("bounded") / "log.db")
    clock = ManualClock("2026-03-01T10:00:00+00:00")
    with Turnlog(path, clock=clock, session_ids=SequentialIds(), owner="gw") as t:
        t.start_gateway("main")
        for turn in range(TURNS):
            for n in range(USERS):
                clock.advance(seconds=5)
                t.handle_message(source(n, turn), f"hello {n}.{turn}", lambda h, item: f"re {item.text}",
                                 lambda *a: None)
            if turn == 1:
                t.command(source(0, 99), "/new")
        t.stop_gateway()
        key = t.routing_key(source(0, 0))
        t.maintenance.catch_up()
        head = t.maintenance.projection_status()[0].head
        own = t.diff("#1", f"#{head}", key=key)
        ledger = t.ledger()
    return path, key, head, own, ledger


@pytest.fixture
def decoded(monkeypatch):
    """How many events the log reader decodes."""
    counts = {"n": 0}
    for name in ("decode", "fields"):
        original = getattr(LogReader, name)

        def counting(self, row, _original=original):
            counts["n"] += 1
            return _original(self, row)
        monkeypatch.setattr(LogReader, name, counting)
    return counts


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_ledger_limit_reads_only_the_rows_it_shows(busy, decoded):
    path, key, head, own, ledger = busy
    assert len(ledger) == USERS * TURNS
    rows = [orjson.loads(line) for line in run("--db", path, "ledger", "--limit", "3", "--nl").splitlines()]
    assert [(r["session_id"], r["seq"]) for r in rows] == [(r.session_id, r.seq) for r in ledger[:3]]
    assert decoded["n"] <= 3, decoded  # the whole ledger would be USERS * TURNS


def test_ledger_limit_with_a_status_is_pushed_down_too(busy, decoded):
    path = busy[0]
    assert run("--db", path, "ledger", "--status", "pending", "--limit", "2", "--nl") == ""
    assert decoded["n"] == 0


def test_diff_with_a_key_reads_only_that_keys_events(busy, decoded):
    path, key, head, own, _ = busy
    out = orjson.loads(run("--db", path, "diff", "#1", f"#{head}", "--key", key, "--json"))
    assert out["keys"] == {key: own["keys"][key]} and sorted(out["sessions"]) == sorted(own["sessions"])
    assert len(out["sessions"]) == 2  # user 0's two sessions (the /new), no other user's
    # User 0 is 1 of USERS keys: its route, inbox, sessions and deliveries are a small part of the log.
    assert decoded["n"] * 5 < head, (decoded, head)


def test_diff_over_its_limit_is_refused_before_any_work(busy, decoded):
    path, key, head, _, _ = busy
    with Turnlog(path, owner="reader") as t:
        from turnlog.errors import TooLarge  # here, not above: the other tests run on a turnlog without it
        decoded["n"] = 0
        with pytest.raises(TooLarge, match=f"reads {head - 1} events, more than the limit of 10"):
            t.diff("#1", f"#{head}", max_events=10)
        assert decoded["n"] == 0
        assert t.diff("#1", "#5", max_events=10)["events"] == 4
