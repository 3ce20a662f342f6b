"""The write-ahead log is copied into the database file off the turn's path (commands/checkpointer.py).

In WAL mode the database file itself only changes when a checkpoint copies frames into it, so
its size says whether one ran. A few turns are far below SQLite's own threshold (1,000 pages) at
which a commit would checkpoint inline.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.storage import checkpointer


def run_turns(t: Turnlog, first: int, count: int) -> None:
    for n in range(first, first + count):
        source = SessionSource(platform="telegram", chat_type="dm", chat_id=str(n % 3), user_id="7", message_id=f"m{n}")
        t.handle_message(source, f"hello {n}", lambda history, item: f"re: {item.text}", lambda text: None)


def checkpointers() -> list[threading.Thread]:
    return [th for th in threading.enumerate() if th.name == "turnlog-wal-checkpoint"]


def open_gateway(db: Path) -> Turnlog:
    return Turnlog(db, clock=ManualClock("2026-03-01T10:00:00+00:00"), session_ids=SequentialIds(), owner="gw")


def test_turns_reach_the_database_file_while_the_gateway_runs(tmp_path: Path) -> None:
    db = tmp_path / "gw.db"
    others = set(checkpointers())
    t = open_gateway(db)
    try:
        run_turns(t, 0, 1)
        size = db.stat().st_size
        run_turns(t, 1, 20)
        deadline = time.monotonic() + 20
        while db.stat().st_size <= size and time.monotonic() < deadline:
            time.sleep(0.05)
        assert db.stat().st_size > size, "no checkpoint copied the new turns into the database file"
        mine = set(checkpointers()) - others
        assert len(mine) == 1
    finally:
        t.close()
    assert not any(th.is_alive() for th in mine)  # closing stops the thread
    assert not os.path.exists(f"{db}-wal") or os.path.getsize(f"{db}-wal") == 0
    c = sqlite3.connect(db)
    try:
        assert c.execute("SELECT count(*) FROM stored_events").fetchone()[0] > 20 * 10
    finally:
        c.close()


def test_inline_mode_leaves_checkpoints_to_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNLOG_WAL_CHECKPOINT", "inline")
    db = tmp_path / "gw.db"
    others = set(checkpointers())
    with open_gateway(db) as t:
        run_turns(t, 0, 1)
        size = db.stat().st_size
        run_turns(t, 1, 20)
        time.sleep(0.3)
        assert db.stat().st_size == size  # still only in the WAL: far below SQLite's threshold
        assert set(checkpointers()) <= others
    with open_gateway(db) as t:
        assert len(t.sessions()) == 3


def test_an_idle_store_that_is_never_closed_keeps_no_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Long enough that the thread outlives the gap between run_turns' last commit and the count
    # below on a loaded machine (at 0.2 s it could end in between); short enough to wait for.
    monkeypatch.setattr(checkpointer, "IDLE_S", 1.0)
    others = set(checkpointers())
    t = open_gateway(tmp_path / "gw.db")
    run_turns(t, 0, 1)
    mine = set(checkpointers()) - others
    assert len(mine) == 1
    for th in mine:
        th.join(timeout=10)
        assert not th.is_alive()
    run_turns(t, 1, 1)  # the next commit starts another
    assert len(set(checkpointers()) - others) == 1
    t.close()


def test_an_unknown_checkpoint_mode_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNLOG_WAL_CHECKPOINT", "sometimes")
    with pytest.raises(Exception, match="TURNLOG_WAL_CHECKPOINT"):
        with open_gateway(tmp_path / "gw.db") as t:
            run_turns(t, 0, 1)
