"""A database file whose pages SQLite finds damaged: every read that meets the damage, at the
open or after it, raises DamagedDatabase (a StoreError) naming the file, never sqlite3's error or
the event store library's wrapping of it; the CLI says it in one line and exits 1."""

from __future__ import annotations

import sqlite3

import pytest

from turnlog import DamagedDatabase, StoreError, Turnlog

from chat import alice, echo
from harness.cli import run
from sqlite_files import checkpoint


def _log(path: str) -> None:
    with Turnlog(path) as t:
        for n in range(12):  # the events table spans several pages
            t.handle_message(alice(f"m-{n}"), f"message {n} " + "x" * 600, echo, lambda text: None)
    checkpoint(path)


def _damage_first_page_of(path: str, table: str) -> None:
    """Overwrite with 0xff the first page SQLite keeps `table` in (its root, or its first leaf)."""
    conn = sqlite3.connect(path)
    try:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = [p for p, kind in conn.execute("SELECT pageno, pagetype FROM dbstat WHERE name = ?", (table,))
                 if kind == "leaf"]
    finally:
        conn.close()
    with open(path, "r+b") as f:
        f.seek((pages[0] - 1) * page_size)
        f.write(b"\xff" * page_size)


@pytest.fixture
def damaged_log(tmp_path) -> str:
    path = str(tmp_path / "t.db")
    _log(path)
    _damage_first_page_of(path, "stored_events")
    return path


def test_reads_of_a_damaged_log_raise_damaged_database_naming_the_file(damaged_log):
    t = Turnlog(damaged_log)
    try:
        reads = {"sessions": lambda: t.sessions(), "search": lambda: t.search("message"),
                 "history": lambda: t.history(t.routing_key(alice())),
                 "at": lambda: t.at("#1"), "catch_up": lambda: t.maintenance.catch_up()}
        for name, read in reads.items():
            with pytest.raises(DamagedDatabase) as raised:
                read()
            assert isinstance(raised.value, StoreError), name
            assert str(raised.value) == (f"{damaged_log} is damaged (database disk image is malformed):"
                                         " restore it from a backup (turnlog restore)"), name
    finally:
        t.close()


def test_damage_met_while_opening_is_damaged_database(tmp_path):
    path = str(tmp_path / "t.db")
    _log(path)
    _damage_first_page_of(path, "projection_positions")  # read by the open's catch-up
    with pytest.raises(DamagedDatabase, match="is damaged .*: restore it from a backup"):
        Turnlog(path)


def test_a_file_of_garbage_bytes_is_no_damaged_database_but_not_a_turnlog_one(tmp_path):
    path = tmp_path / "t.db"
    path.write_bytes(b"\x8f garbage \x00" * 2000)
    with pytest.raises(StoreError, match="not a turnlog database") as raised:
        Turnlog(str(path))
    assert not isinstance(raised.value, DamagedDatabase)


def test_the_cli_says_a_damaged_log_in_one_line_and_exits_1(damaged_log):
    result = run("--db", damaged_log, "sessions")
    assert result.exit_code == 1
    assert result.output == (f"Error: {damaged_log} is damaged (database disk image is malformed):"
                             " restore it from a backup (turnlog restore)\n")


def test_a_damaged_database_of_the_gateways_own_is_its_error_not_turnlogs(tmp_path):
    own = str(tmp_path / "agent-memory.db")
    conn = sqlite3.connect(own)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.executemany("INSERT INTO notes VALUES (?)", [("x" * 600,)] * 40)
    conn.commit()
    conn.close()
    _damage_first_page_of(own, "notes")

    def agent(history, text):
        with sqlite3.connect(own) as memory:
            return str(memory.execute("SELECT count(*), max(body) FROM notes").fetchone())

    with Turnlog(str(tmp_path / "t.db")) as t:
        with pytest.raises(sqlite3.DatabaseError, match="malformed") as raised:
            t.handle_message(alice("hi"), "hi", agent, lambda text: None)
        assert not isinstance(raised.value, StoreError)
        t.handle_message(alice("again"), "again", echo, lambda text: None)  # turnlog's file is fine
        session, = t.sessions()
        assert "again" in [m["content"] for m in t.transcript(session.session_id)]
