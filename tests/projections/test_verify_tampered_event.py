"""`verify` on a log with a tampered event names the event (its position and what is wrong with
it), as `verify --chain` does, instead of failing in the decoder or a projection."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from harness.cli import ok, run

TAMPERED = "turnlog:RouteRegistered"  # the first event of this topic is the one changed


# Not conftest's `db`: a Path to a log the `demo` command filled, whose bytes the tests tamper with.
@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "turnlog.db"
    ok("--db", str(path), "demo")
    return path


def tamper(db: Path, change) -> int:
    """Change the first TAMPERED event's stored state; returns its position."""
    conn = sqlite3.connect(db)
    with conn:
        position = conn.execute("SELECT min(rowid) FROM stored_events WHERE topic=?", (TAMPERED,)).fetchone()[0]
        other = conn.execute("SELECT state FROM stored_events WHERE topic='turnlog:RouteBound' ORDER BY rowid"
                             " LIMIT 1").fetchone()[0]
        conn.execute("UPDATE stored_events SET state=? WHERE rowid=?", (change(other), position))
    conn.close()
    return position


CHANGES = {
    "not a zstd frame": lambda other: b"\x02" + bytes(range(40)),  # turnlog's compressed form, damaged
    "another event's fields": lambda other: other,
}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_verify_names_the_tampered_event(db, change):
    position = tamper(db, CHANGES[change])
    result = run("--db", str(db), "verify")
    assert result.exit_code == 1
    assert not any(line.startswith("Error:") for line in result.output.splitlines())
    assert "Traceback" not in result.output
    assert f"event at position {position} ({TAMPERED}) cannot be read" in result.output
    chain = run("--db", str(db), "verify", "--chain")
    assert f"event at position {position} edited" in chain.output


def test_a_read_that_meets_a_tampered_event_names_it_in_one_line(db):
    position = tamper(db, CHANGES["not a zstd frame"])
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE projection_positions SET position=0")  # the read models must read it again
    conn.close()
    result = run("--db", str(db), "sessions")
    assert result.exit_code == 1
    assert result.output.count("\n") == 1
    assert f"the event at position {position} ({TAMPERED})" in result.output and "verify --chain" in result.output


def test_verify_chain_names_the_tampered_event_when_the_read_models_are_behind_it(db):
    position = tamper(db, CHANGES["not a zstd frame"])
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE projection_positions SET position=0")
    conn.close()
    result = run("--db", str(db), "verify", "--chain")
    assert result.exit_code == 1
    assert result.output == f"chain: event at position {position} edited\n"
