"""The chain is sealed by the transaction that writes each event (issue 11 item 2).

Nothing reads or seals between the writes and the tampering here: the gateway writes turns, the
file is changed behind its back, and `turnlog verify --chain` (a fresh process's view, through
the CLI) must name what happened by position. Before sealing on write, verification sealed
whatever it found first, so each of these passed as `chain: ok`.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from uuid import UUID

import pytest
from click.testing import CliRunner

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.cli import main
from turnlog.storage.event_compressor import compact, inflate
from turnlog.storage.recorder import ChainBroken
from turnlog.domain.chain import GENESIS, link


def source(n: int) -> SessionSource:
    return SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", message_id=f"m{n}")


def write_turns(db: Path, first: int, count: int) -> None:
    """Turns through the gateway path only: no read, no seal, no verify."""
    # Unencrypted: the edits below change message text in the stored bytes, which encryption at
    # rest would seal (a sealed log's chain: tests/storage/test_encryption.py).
    with Turnlog(db, clock=ManualClock(f"2026-03-01T10:{first:02d}:00+00:00"), session_ids=SequentialIds(),
                 owner="gw-1", encryption=False) as t:
        for n in range(first, first + count):
            t.handle_message(source(n), f"hello {n}", lambda history, item: f"re: {item.text}", lambda text: None)


def sql(db: Path, statement: str, params: tuple = ()) -> int:
    c = sqlite3.connect(db, isolation_level=None)
    try:
        return c.execute(statement, params).rowcount
    finally:
        c.close()


def head(db: Path) -> int:
    c = sqlite3.connect(db)
    try:
        return c.execute("SELECT max(rowid) FROM stored_events").fetchone()[0]
    finally:
        c.close()


def position_of(db: Path, text: str) -> int:
    c = sqlite3.connect(db)
    try:
        rows = [p for p, state in c.execute("SELECT rowid, state FROM stored_events"
                                            " WHERE topic='turnlog:MessageAppended'")
                if f'"content":"{text}"'.encode() in inflate(state)]
    finally:
        c.close()
    assert len(rows) == 1, rows
    return rows[0]


def edit(db: Path, position: int, old: str, new: str) -> None:
    c = sqlite3.connect(db, isolation_level=None)
    try:
        state = inflate(c.execute("SELECT state FROM stored_events WHERE rowid=?", (position,)).fetchone()[0])
        assert old.encode() in state
        c.execute("UPDATE stored_events SET state=? WHERE rowid=?",
                  (compact(state.replace(old.encode(), new.encode())), position))
    finally:
        c.close()


def verify_cli(db: Path, *extra: str):
    return CliRunner().invoke(main, ["--db", str(db), "verify", "--chain", *extra])


def verify_json(db: Path) -> dict:
    result = verify_cli(db, "--json")
    assert "Traceback" not in result.output
    return {"exit": result.exit_code, **json.loads(result.output)}


# Not conftest's `db`: a Path to a log already holding turns 1-3 (the raw-file helpers read it).
@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.db"
    write_turns(path, 1, 3)
    return path


def test_an_untouched_log_written_without_any_read_verifies_ok(db):
    result = verify_cli(db)
    assert result.exit_code == 0, result.output
    assert result.output == "chain: ok\n"


def test_an_edit_made_before_anything_read_the_log_is_named(db):
    position = position_of(db, "hello 2")
    edit(db, position, "hello 2", "hello 9")
    result = verify_cli(db)
    assert result.exit_code == 1
    assert result.output == f"chain: event at position {position} edited\n"


def test_an_edit_with_its_seal_and_every_later_seal_deleted_is_named_unsealed(db):
    position = position_of(db, "hello 2")
    edit(db, position, "hello 2", "hello 9")
    assert sql(db, "DELETE FROM chain WHERE position >= ?", (position,)) > 0
    report = verify_json(db)
    assert report["exit"] == 1 and report["ok"] is False
    assert report["breaks"] == [{"position": position, "problem": "unsealed", "through": head(db)}]


def test_a_dropped_chain_is_named_from_the_first_event(db):
    sql(db, "DROP TABLE chain")
    result = verify_cli(db)
    assert result.exit_code == 1
    assert result.output == f"chain: events at positions 1-{head(db)} unsealed\n"


def test_a_dropped_tail_of_the_log_is_named_missing_position_by_position(db):
    last = head(db)
    assert sql(db, "DELETE FROM stored_events WHERE rowid > ?", (last - 3,)) == 3
    report = verify_json(db)
    assert report["exit"] == 1
    assert report["breaks"] == [{"position": p, "problem": "missing"} for p in (last - 2, last - 1, last)]


def test_an_event_forged_onto_the_end_is_named_unsealed(db):
    c = sqlite3.connect(db)
    row = c.execute("SELECT originator_id, originator_version, topic, state FROM stored_events"
                    " ORDER BY rowid DESC LIMIT 1").fetchone()
    c.close()
    sql(db, "INSERT INTO stored_events VALUES (?, ?, ?, ?)", (row[0], row[1] + 1, row[2], row[3]))
    report = verify_json(db)
    assert report["breaks"] == [{"position": head(db), "problem": "unsealed"}]


def test_writing_after_the_log_was_shortened_is_refused_not_resealed(db):
    last = head(db)
    sql(db, "DELETE FROM stored_events WHERE rowid = ?", (last,))
    with pytest.raises(ChainBroken, match="shortened"):
        write_turns(db, 10, 1)
    assert head(db) == last - 1  # nothing of the refused write was kept
    assert verify_json(db)["breaks"] == [{"position": last, "problem": "missing"}]


def test_a_seal_cut_short_does_not_pass_for_a_match(db):
    position = position_of(db, "hello 2")
    edit(db, position, "hello 2", "hello 9")
    sql(db, "UPDATE chain SET hash=? WHERE position=?", (b"", position))
    # the next event's link covers the seal before it, so the forged seal is named there too
    assert verify_json(db)["breaks"] == [{"position": p, "problem": "edited"} for p in (position, position + 1)]


def test_later_writes_extend_the_chain_and_an_old_edit_stays_named(db):
    position = position_of(db, "hello 1")
    edit(db, position, "hello 1", "HELLO 1")
    write_turns(db, 10, 2)
    assert verify_json(db)["breaks"] == [{"position": position, "problem": "edited"}]


# -- a database written by turnlog before sealing on write ------------------------------------------

def make_legacy(db: Path, sealed_through: int) -> None:
    """What an older turnlog left: a chain of full links (hex text) sealed by a read up to some
    position, no chain_meta."""
    c = sqlite3.connect(db, isolation_level=None)
    try:
        c.execute("DROP TABLE chain_meta")
        c.execute("DROP TABLE chain")
        c.execute("CREATE TABLE chain (position INTEGER PRIMARY KEY, hash TEXT NOT NULL)")
        previous = GENESIS
        for row in c.execute("SELECT rowid, originator_id, originator_version, topic, state FROM stored_events"
                             " WHERE rowid <= ? ORDER BY rowid", (sealed_through,)).fetchall():
            previous = link(previous, row[0], UUID(row[1]), *row[2:])
            c.execute("INSERT INTO chain VALUES (?, ?)", (row[0], previous))
    finally:
        c.close()


def test_a_legacy_log_reports_its_unsealed_events_until_the_next_write_seals_them(db):
    last = head(db)
    make_legacy(db, 5)
    before = verify_json(db)
    assert before["exit"] == 1
    assert before["breaks"] == [{"position": 6, "problem": "unsealed", "through": last}]
    assert before["sealed_late"] is None

    write_turns(db, 10, 1)  # the first write of this version seals the older events as they are now
    after = verify_cli(db)
    assert after.exit_code == 0, after.output
    assert after.output == ("chain: ok\n"
                            f"chain: note: positions 1-{last} were written before sealing on write and sealed"
                            " by a later write, as they were then\n")
    assert verify_json(db)["sealed_late"] == {"from": 1, "through": last}


def test_an_edit_inside_a_legacy_sealed_prefix_is_still_named_after_adoption(db):
    position = position_of(db, "hello 1")
    make_legacy(db, position + 2)
    edit(db, position, "hello 1", "hello 7")
    write_turns(db, 10, 1)
    assert verify_json(db)["breaks"] == [{"position": position, "problem": "edited"}]
