"""`turnlog archive` SIGKILLed at each of its points (a real process, tests/harness): the database
is then in the old state or the new, never with a session in neither, and the chain verifies."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import procs
from turnlog import ManualClock, Turnlog

from chat import BOB, alice, collect, echo

START = "2026-01-01T00:00:00+00:00"
LATER = "2026-04-15T00:00:00+00:00"  # 104 days on: the reset session is archivable

ARCHIVE = 't.archive(kit.work / "old.tlar", progress=progress)'

# Each snippet opens the database 104 days on and archives to old.tlar, dying at its point.
POINTS = {
    # the archive file is whole on disk; the log not yet changed
    "file-written": """
t = kit.turnlog()
def progress(done, total):
    if done == 1:
        kit.kill_self()
""",
    # inside the transaction: SessionsArchived inserted, the events deleted, not committed
    "in-transaction": """
t = kit.turnlog()
kit.kill_in_transaction(t, "turnlog:SessionsArchived")
progress = None
""",
    # the transaction committed, the read models not yet refilled
    "committed": """
t = kit.turnlog()
kit.kill_after_save(t, lambda items: any(type(i).__name__ == "SessionsArchived" for i in items))
progress = None
""",
    # somewhere in the refill of the read models
    "refilling": """
t = kit.turnlog()
def progress(done, total):
    if done == 2:
        kit.ready()
""",
}


def prepare(db: Path) -> tuple[str, list[dict]]:
    sent: list[str] = []
    with Turnlog(db, clock=ManualClock(START)) as t:
        for i in range(20):
            t.handle_message(alice(f"a{i}"), f"hello {i}", echo, collect(sent))
        old = t.session(alice()).session_id
        t.command(alice("reset"), "/reset")
        t.handle_message(alice("b"), "again", echo, collect(sent))
        t.handle_message(BOB, "bob", echo, collect(sent))
        return old, t.transcript(old)


@pytest.mark.parametrize("point", sorted(POINTS))
def test_an_archive_killed_at_any_point_leaves_the_old_state_or_the_new(tmp_path, point):
    db = tmp_path / "live.db"
    old, transcript = prepare(db)
    code = POINTS[point] + ARCHIVE + ("\nkit.hang()" if point == "refilling" else "")
    procs.crash(db, code, at=LATER, work=tmp_path)
    archive = tmp_path / "old.tlar"
    with Turnlog(db, clock=ManualClock(LATER)) as t:
        assert not t.maintenance.verify_chain().breaks
        row = t.session(old)
        if point in ("file-written", "in-transaction"):  # the old state: the log as it was
            assert not row.archived and t.transcript(old) == transcript
            archive.unlink(missing_ok=True)  # an archive nothing refers to
            t.archive(archive)  # and a second run archives
            assert t.session(old).archived
        else:  # the new state: archived, in a whole file that restores
            assert row.archived and t.transcript(old) == []
        assert t.restore_archive(archive).sessions == [old]
        assert t.transcript(old) == transcript
        assert not t.maintenance.verify_chain().breaks
