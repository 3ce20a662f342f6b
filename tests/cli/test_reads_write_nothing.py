"""A read command with nothing to catch up writes nothing (the file and its write-ahead log keep
their bytes), so it needs no write lock: while another process holds it, a read answers from
the read models as of their positions, with a one-line note when they are behind the log."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.cli import ok, run
from turnlog import SessionSource, Turnlog

KEY = "agent:main:telegram:dm:42"
ROUTE = ["route", "--platform", "telegram", "--chat-id", "42", "--user-id", "42"]
READS = [["sessions"], ["status"], ["ledger"], ["recover", "--dry-run"], ["show", KEY], ["history", KEY],
         ["search", "hello"], ["doctor", "--dry-run"], ["verify"]]

# Holds the database's write lock (as a gateway mid-commit or a long rebuild does) until a line
# arrives on stdin; says "held" once it has it.
HOLDER = textwrap.dedent("""
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    print("held", flush=True)
    sys.stdin.readline()
    conn.execute("ROLLBACK")
""")


def fingerprint(db: Path) -> dict[str, str]:
    """sha256 of the database file and of its -wal (and whether each exists)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in (db, db.with_name(db.name + "-wal")) if p.exists()}


# Not conftest's `db`: a Path to a log holding one routed message with caught-up read models.
@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "turnlog.db"
    ok("--db", str(path), *ROUTE)
    ok("--db", str(path), "sessions")  # the read models caught up
    return path


def test_three_rounds_of_reads_leave_the_file_and_its_wal_unchanged(db):
    before = fingerprint(db)
    for _ in range(3):
        for args in READS:
            assert run("--db", str(db), *args).exit_code == 0, args
            assert fingerprint(db) == before, args


class WriteLockHeld:
    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def __enter__(self) -> "WriteLockHeld":
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "held\n"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def test_a_read_answers_while_another_process_holds_the_write_lock(db):
    with WriteLockHeld(db):
        result = run("--db", str(db), "sessions", "--json")
        assert result.exit_code == 0, result.output
        assert [s["session_key"] for s in json.loads(result.stdout)] == [KEY]
        assert run("--db", str(db), "recover", "--dry-run").exit_code == 0


def test_a_read_behind_the_log_answers_as_of_its_positions_with_a_note_while_the_lock_is_held(db):
    with Turnlog(str(db)) as t:  # written, not caught up: the read models are behind
        t.get_or_create_session(SessionSource(platform="telegram", chat_type="dm", chat_id="7", user_id="7"))
        behind = t.maintenance.projections_behind()
    assert behind > 0
    with WriteLockHeld(db):
        result = run("--db", str(db), "sessions", "--json")
        assert result.exit_code == 0, result.output
        assert [s["session_key"] for s in json.loads(result.stdout)] == [KEY]
        assert result.stderr == (f"note: {db} is being written by another process: read models are {behind}"
                                 " events behind the log (may be stale)\n")
    caught_up = run("--db", str(db), "sessions", "--json")
    assert caught_up.stderr == "" and len(json.loads(caught_up.stdout)) == 2
