"""A disk that is full, fails to read or refuses access is reported as that, never as a file of
the wrong kind (an operator told "not a turnlog database" may delete a healthy file).

The error is injected where SQLite raises it: a connection whose statements fail with the
result code SQLite gives (SQLITE_FULL, SQLITE_IOERR_READ, ...), so the classification that runs
is the real one."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from harness.cli import ok, run

ROUTE = ["route", "--platform", "telegram", "--chat-id", "42", "--user-id", "42"]
FAILURES = [
    ("SQLITE_FULL", "database or disk is full", "the disk is full"),
    ("SQLITE_IOERR_READ", "disk I/O error", "an I/O error"),
    ("SQLITE_IOERR_SHORT_READ", "disk I/O error", "an I/O error"),
    ("SQLITE_PERM", "access permission denied", "permission denied"),
    ("SQLITE_CANTOPEN", "unable to open database file", "it cannot be opened"),
]


class FailingConnection:
    """A real connection whose statements all fail as a failing disk makes them fail."""

    def __init__(self, conn: sqlite3.Connection, name: str, message: str) -> None:
        self.conn, self.name, self.message = conn, name, message

    def execute(self, *args, **kwargs):
        error = sqlite3.OperationalError(self.message)
        error.sqlite_errorname = self.name
        raise error

    def __getattr__(self, attr):
        return getattr(self.conn, attr)


# Not conftest's `db`: a Path to a log already holding one routed message (tests hash its bytes).
@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "turnlog.db"
    ok("--db", str(path), *ROUTE)
    return path


@pytest.mark.parametrize("args", [["sessions"], ROUTE], ids=["read", "write"])
@pytest.mark.parametrize("name,message,said", FAILURES, ids=[f[0] for f in FAILURES])
def test_a_failing_disk_is_named_as_such_and_the_file_is_left_alone(db, monkeypatch, args, name, message, said):
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    real = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: FailingConnection(real(*a, **k), name, message))
    result = run("--db", str(db), *args)
    monkeypatch.undo()
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert said in result.output and message in result.output
    assert "not a turnlog database" not in result.output and "not a turnlog one" not in result.output
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_a_file_that_is_not_a_database_is_still_called_one(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 84 + b"x" * 4000)
    result = run("--db", str(path), "sessions")
    assert result.exit_code == 1
    assert result.output == f"Error: {path} is not a turnlog database (file is not a database)\n"
