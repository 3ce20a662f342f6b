"""The hash chain over the stored log: tamper evidence at the public surface (`seal`, `verify_chain`).

Each test lives a few turns (ManualClock, SequentialIds), lets the chain seal them, then changes
the SQLite file behind turnlog's back with raw sqlite3, the way someone with the file could: an
event's stored bytes edited, an event deleted, two events' bytes swapped. `verify_chain()` must
name exactly the positions touched, in a Turnlog opened afresh on the file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.storage.event_compressor import compact, inflate
from turnlog.storage.chain import ChainBreak

from chat import alice, echo, reply_with

KEY = "agent:main:telegram:dm:42"


def open_log(db: Path, minute: int = 0) -> Turnlog:
    # Unencrypted: the tampering edits message text in the stored bytes, which encryption at rest
    # would seal (a sealed log's chain: tests/storage/test_encryption.py).
    return Turnlog(db, clock=ManualClock(f"2026-03-01T10:{minute:02d}:00+00:00"), session_ids=SequentialIds(),
                   owner="gw-1", encryption=False)


def live_turns(db: Path, texts: list[str], first_minute: int = 1) -> None:
    with open_log(db) as t:
        for n, text in enumerate(texts):
            t._clock.set(f"2026-03-01T10:{first_minute + n:02d}:00+00:00")
            t.handle_message(alice(f"m{first_minute + n}"), text, echo, lambda reply: None)
        t.maintenance.seal()


def user_message_position(db: Path, text: str) -> int:
    with open_log(db) as t:
        found = [h.position for h in t.history(KEY, types=["MessageAppended"])
                 if h.data["role"] == "user" and h.data["content"] == text]
    assert len(found) == 1, (text, found)
    return found[0]


def raw(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(db, isolation_level=None)


def state_of(db: Path, rowid: int) -> bytes:
    with raw(db) as c:
        return inflate(c.execute("SELECT state FROM stored_events WHERE rowid=?", (rowid,)).fetchone()[0])


def set_state(db: Path, rowid: int, state: bytes) -> None:
    c = raw(db)
    try:
        assert c.execute("UPDATE stored_events SET state=? WHERE rowid=?", (compact(state), rowid)).rowcount == 1
    finally:
        c.close()


def delete_event(db: Path, rowid: int) -> None:
    c = raw(db)
    try:
        assert c.execute("DELETE FROM stored_events WHERE rowid=?", (rowid,)).rowcount == 1
    finally:
        c.close()


def verify(db: Path) -> list[ChainBreak]:
    with open_log(db, 30) as t:
        return t.maintenance.verify_chain().breaks


# Not conftest's `db`: a Path to a log already holding three sealed turns (the sqlite3 helpers read it).
@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.db"
    live_turns(path, ["hello 1", "hello 2", "hello 3"])
    return path


def count_events(db: Path) -> int:
    with raw(db) as c:
        return c.execute("SELECT MAX(rowid) FROM stored_events").fetchone()[0]


def sealed_positions(db: Path) -> list[int]:
    with raw(db) as c:
        return [row[0] for row in c.execute("SELECT position FROM chain ORDER BY position")]


# -- an untouched log ------------------------------------------------------------------------------

def test_an_untouched_log_verifies_clean_and_every_event_is_sealed(db):
    assert verify(db) == []
    assert sealed_positions(db) == list(range(1, count_events(db) + 1))


def test_events_written_after_a_seal_extend_the_chain_and_still_verify(db):
    before = count_events(db)
    live_turns(db, ["hello 4"], first_minute=4)
    with open_log(db, 30) as t:
        assert t.maintenance.seal() == 0  # the turn's reads already sealed it
        assert t.maintenance.verify_chain().breaks == []
    assert count_events(db) > before
    assert sealed_positions(db) == list(range(1, count_events(db) + 1))


def test_each_write_seals_its_own_events_so_seal_finds_nothing_left(tmp_path):
    db = tmp_path / "gateway.db"
    with open_log(db) as t:
        t.get_or_create_session(alice("m1"))
        assert sealed_positions(db) == list(range(1, count_events(db) + 1))
        assert t.maintenance.seal() == 0
        assert t.maintenance.verify_chain().breaks == []


# -- tampering ---------------------------------------------------------------------------------------

def test_an_edited_event_is_named_by_its_position(db):
    position = user_message_position(db, "hello 2")
    state = state_of(db, position)
    assert b'"content":"hello 2"' in state
    set_state(db, position, state.replace(b'"content":"hello 2"', b'"content":"hello 9"'))
    with open_log(db, 30) as t:  # the edit is real: the engine now reads the forged text
        t.maintenance.rebuild(["search"])  # (transcripts are read through it, built before the edit)
        s1 = t.session(t.routes()[0].session_id).session_id
        assert [m["content"] for m in t.transcript(s1) if m["role"] == "user"] == ["hello 1", "hello 9", "hello 3"]
    assert verify(db) == [ChainBreak(position, "edited")]


def test_a_one_byte_edit_of_the_newest_event_is_named(db):
    head = count_events(db)
    state = state_of(db, head)
    assert state.count(b"+00:00") == 1  # its time: moved by a minute in the zone offset's last byte
    set_state(db, head, state.replace(b"+00:00", b"+00:01"))
    assert verify(db) == [ChainBreak(head, "edited")]


def test_a_deleted_event_is_named_missing(db):
    position = user_message_position(db, "hello 2")
    delete_event(db, position)
    assert verify(db) == [ChainBreak(position, "missing")]


def test_deleting_the_newest_event_is_named_missing_too(db):
    head = count_events(db)
    delete_event(db, head)
    assert verify(db) == [ChainBreak(head, "missing")]


def test_two_swapped_events_are_both_named(db):
    first, second = user_message_position(db, "hello 1"), user_message_position(db, "hello 3")
    a, b = state_of(db, first), state_of(db, second)
    set_state(db, first, b)
    set_state(db, second, a)
    assert verify(db) == [ChainBreak(first, "edited"), ChainBreak(second, "edited")]


def test_an_edit_is_still_named_after_more_events_are_sealed_on_top(db):
    position = user_message_position(db, "hello 1")
    set_state(db, position, state_of(db, position).replace(b"hello 1", b"HELLO 1"))
    live_turns(db, ["hello 4", "hello 5"], first_minute=4)
    assert verify(db) == [ChainBreak(position, "edited")]


def test_edits_and_deletions_together_are_each_named_in_order(db):
    edited = user_message_position(db, "hello 3")
    deleted = user_message_position(db, "hello 1")
    set_state(db, edited, state_of(db, edited).replace(b"hello 3", b"hello 0"))
    delete_event(db, deleted)
    breaks = verify(db)
    assert breaks == [ChainBreak(deleted, "missing"), ChainBreak(edited, "edited")]
    assert [b.to_dict() for b in breaks] == [{"position": deleted, "problem": "missing"},
                                             {"position": edited, "problem": "edited"}]


def test_restoring_the_original_bytes_verifies_clean_again(db):
    position = user_message_position(db, "hello 2")
    original = state_of(db, position)
    set_state(db, position, original.replace(b"hello 2", b"hello 9"))
    assert verify(db) == [ChainBreak(position, "edited")]
    set_state(db, position, original)
    assert verify(db) == []


def test_verify_chain_cli_names_an_edited_event_and_passes_when_untouched(tmp_path):
    import sqlite3

    from click.testing import CliRunner

    from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog
    from turnlog.cli import main

    db = str(tmp_path / "chain.db")
    with Turnlog(db, clock=ManualClock(), session_ids=SequentialIds()) as t:
        source = SessionSource(platform="telegram", chat_type="dm", chat_id="1", user_id="1")
        for n in range(3):
            source.message_id = f"m{n}"
            t.handle_message(source, f"q{n}", reply_with("a"), lambda text: None)
        t.maintenance.seal()
    runner = CliRunner()
    clean = runner.invoke(main, ["--db", db, "verify", "--chain"])
    assert clean.exit_code == 0 and "chain: ok" in clean.output

    conn = sqlite3.connect(db)
    conn.execute("UPDATE stored_events SET state=? WHERE rowid=?", (b'{"tampered":true}', 7))
    conn.commit()
    conn.close()
    broken = runner.invoke(main, ["--db", db, "verify", "--chain", "--json"])
    assert broken.exit_code == 1
    assert '"position": 7' in broken.output and '"edited"' in broken.output
    assert "Traceback" not in broken.output
