"""The hash chain across archived positions: the archive's event stands in for the removed events,
so a seal changed behind turnlog's back there is still caught, and a removal not made by an
archive is still a missing event."""

from __future__ import annotations

import json
import sqlite3
import zipfile

from turnlog import Turnlog

from chat import alice, collect, echo


def archived(make_turnlog, clock, tmp_path) -> tuple[Turnlog, list[int]]:
    t = make_turnlog()
    for i in range(5):
        t.handle_message(alice(f"a{i}"), f"hello {i}", echo, collect([]))
    t.command(alice("reset"), "/reset")
    t.handle_message(alice("b"), "again", echo, collect([]))
    clock.advance(days=100)
    report = t.archive(tmp_path / "old.tlar")
    with zipfile.ZipFile(tmp_path / "old.tlar") as z:
        positions = [json.loads(line)["position"] for line in z.read("events.jsonl").splitlines()]
    assert report.events == len(positions)
    return t, positions


def test_the_chain_verifies_across_an_archive(make_turnlog, clock, tmp_path):
    t, positions = archived(make_turnlog, clock, tmp_path)
    assert not t.maintenance.verify_chain().breaks


def test_an_archived_positions_seal_changed_afterwards_is_caught(make_turnlog, clock, tmp_path, db):
    t, positions = archived(make_turnlog, clock, tmp_path)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE chain SET hash=? WHERE position=?", (b"\x00" * 16, positions[3]))
    conn.close()
    breaks = t.maintenance.verify_chain().breaks
    assert [b.problem for b in breaks] and all(b.problem == "edited" for b in breaks)


def test_an_event_deleted_outside_an_archive_is_still_missing(make_turnlog, clock, tmp_path, db):
    t, positions = archived(make_turnlog, clock, tmp_path)
    kept = min(set(range(1, t.maintenance.log_head())) - set(positions))  # an event of the live session
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM stored_events WHERE rowid=?", (kept,))
    conn.close()
    assert [(b.position, b.problem) for b in t.maintenance.verify_chain().breaks] == [(kept, "missing")]


def test_the_archive_event_deleted_leaves_its_positions_missing(make_turnlog, clock, tmp_path, db):
    t, positions = archived(make_turnlog, clock, tmp_path)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM stored_events WHERE topic='turnlog:SessionsArchived'")
    conn.close()
    missing = {b.position for b in t.maintenance.verify_chain().breaks if b.problem == "missing"}
    assert set(positions) < missing  # nothing vouches for the hole any more


def test_a_copy_made_after_an_archive_verifies_and_lists_the_archived_sessions(make_turnlog, clock, tmp_path):
    t, positions = archived(make_turnlog, clock, tmp_path)
    old = next(s.session_id for s in t.sessions() if s.archived)
    report = t.copy_to(tmp_path / "copy.db")
    assert report.chain_ok
    with Turnlog(tmp_path / "copy.db") as copy:
        assert not copy.maintenance.verify_chain().breaks
        assert copy.session(old).archived
