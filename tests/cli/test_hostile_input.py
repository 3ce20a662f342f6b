"""Every `turnlog` command against every kind of bad database: one line, the right exit code, no
traceback, and not one byte of the file changed (issue 11, items 4, 6 and 7)."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import stat
from pathlib import Path
from typing import Callable

import pytest
from click.testing import CliRunner, Result
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from turnlog import SessionSource, StoreError, Turnlog
from turnlog.cli import main
from turnlog.storage import dbfile
from harness.hermes_home import fixture_home

from chat import alice

KEY = "agent:main:telegram:dm:42"
ROUTE = ["--platform", "telegram", "--chat-id", "42", "--user-id", "42"]

# Every command that opens the database, with arguments that name what the good database holds
# ({sid}: its session id). Whether each writes is the CLI's own decision; the table says what
# the outcome must be.
WRITES = "writes"
READS = "reads"
COMMANDS: list[tuple[str, list[str]]] = [
    (WRITES, ["route", *ROUTE]),
    (READS, ["sessions"]),
    (READS, ["show", KEY]),
    (READS, ["history", KEY]),
    (READS, ["at", "#1"]),
    (READS, ["at", "#2", "sessions"]),
    (READS, ["diff", "#1", "#2"]),
    (WRITES, ["suspend", KEY]),
    (WRITES, ["undo", KEY]),
    (WRITES, ["resume-pending", KEY]),
    (WRITES, ["switch", KEY, "{sid}"]),
    (READS, ["title", "{sid}"]),
    (WRITES, ["title", "{sid}", "hostile input"]),
    (WRITES, ["rekey", "--group-sessions-per-user", "false"]),
    (READS, ["rekey", "--group-sessions-per-user", "false", "--dry-run"]),
    (READS, ["export-routing"]),
    (READS, ["export", KEY]),
    (WRITES, ["fork", "{sid}", "--at", "#3"]),
    (WRITES, ["compact", "{sid}"]),
    (READS, ["ledger"]),
    (READS, ["metrics"]),
    (READS, ["queue", KEY]),
    (READS, ["delegations"]),
    (WRITES, ["ingest", "{jsonl}"]),
    (READS, ["status"]),
    (WRITES, ["recover"]),
    (READS, ["recover", "--dry-run"]),
    (WRITES, ["rebuild", "--all"]),
    (READS, ["verify"]),
    (READS, ["verify", "--chain"]),
    (WRITES, ["doctor"]),
    (READS, ["doctor", "--dry-run"]),
    (READS, ["search", "hello"]),
    (WRITES, ["import-hermes", "{hermes}"]),
    (READS, ["import-hermes", "{hermes}", "--dry-run"]),
    (READS, ["export-hermes", "{out}"]),
    (READS, ["backup", "{out}.backup.db"]),
    (READS, ["copy", "--to", "{out}.copy.db"]),
    (WRITES, ["archive", "{out}.tlar", "--older-than", "1d"]),
    (READS, ["archive", "{out}.tlar", "--dry-run"]),
    (WRITES, ["restore-archive", "{out}.tlar"]),
    (WRITES, ["compact-file"]),
    (WRITES, ["encrypt"]),
    (READS, ["keys"]),
    (WRITES, ["keys", "rotate"]),
    (WRITES, ["erase", "--subject", "telegram:42"]),
]


def agent(history, item) -> str:
    return "hi there"


@pytest.fixture(scope="module")
def good_db(tmp_path_factory) -> tuple[Path, str]:
    """A turnlog database with a session, a transcript, a delivery, an audit trail."""
    path = tmp_path_factory.mktemp("good") / "good.db"
    # Unencrypted: the tests copy the file alone into odd places (an encrypted one would need its
    # key file beside each copy; refusal without a key: tests/storage/test_encryption.py).
    with Turnlog(str(path), encryption=False) as t:
        t.handle_message(alice("m1"), "hello", agent, lambda text: None)
        sid = t.sessions()[0].session_id
    assert sorted(p.name for p in path.parent.iterdir()) == ["good.db"]
    return path, sid


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "directory"


def run(db: Path, args: list[str], **fill: str) -> Result:
    # {out}: a Hermes home to write, beside (never inside) the database's folder.
    fill = {"hermes": str(fixture_home()), "out": str(db.parent.parent / "hermes-out"), **fill}
    argv = ["--db", str(db), *(a.format(**fill) for a in args)]
    return CliRunner().invoke(main, argv, env={"TURNLOG_DB": None, "TURNLOG_DEBUG": None})


def assert_one_line_failure(result: Result, exit_code: int, *mentions: str) -> None:
    assert result.exit_code == exit_code, (result.stdout, result.stderr)
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert result.stdout == ""
    for text in mentions:
        assert text in lines[0], lines[0]


# -- the kinds of bad database ----------------------------------------------------------------

def make_directory(path: Path, good: Path) -> None:
    path.mkdir()


def make_text(path: Path, good: Path) -> None:
    path.write_text("shopping list: eggs, milk\n")


def make_empty(path: Path, good: Path) -> None:
    path.write_bytes(b"")


def make_truncated(path: Path, good: Path) -> None:
    data = good.read_bytes()
    path.write_bytes(data[: len(data) // 2])


class Dog(Aggregate):
    @event("Registered")
    def __init__(self, name: str) -> None:
        self.name = name


def make_foreign_eventsourcing(path: Path, good: Path) -> None:
    """Another eventsourcing application's database: the same `stored_events` table, not turnlog's."""
    app = Application(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)})
    app.save(Dog("fido"))
    app.close()
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    assert "stored_events" in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()


REFUSED: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "directory": (make_directory, "is a directory, not a turnlog database"),
    "not-sqlite": (make_text, "not a turnlog database"),
    "empty": (make_empty, "empty file, not a turnlog database"),
    "truncated": (make_truncated, "truncated"),
    "foreign-stored-events": (make_foreign_eventsourcing, "not a turnlog one"),
}


def snapshot(folder: Path) -> dict[str, str]:
    return {p.name: sha(p) for p in folder.iterdir()}


@pytest.mark.parametrize("kind", list(REFUSED))
@pytest.mark.parametrize("what,args", COMMANDS, ids=[" ".join(a) for _, a in COMMANDS])
def test_a_database_that_is_not_turnlogs_is_refused_untouched(tmp_path, good_db, kind, what, args):
    make, message = REFUSED[kind]
    folder = tmp_path / "data"
    folder.mkdir()
    db = folder / "bad.db"
    make(db, good_db[0])
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"platform": "telegram", "chat_id": "42", "user_id": "42", "text": "hi"}\n')
    before = snapshot(folder)

    result = run(db, args, sid=good_db[1], jsonl=str(jsonl))

    assert_one_line_failure(result, 1, str(db), message)
    assert snapshot(folder) == before  # not a byte changed, no -wal/-shm/-journal made


def test_demo_refuses_every_bad_database_as_not_fresh(tmp_path, good_db):
    for kind, (make, _) in REFUSED.items():
        db = tmp_path / f"{kind}.db"
        make(db, good_db[0])
        before = sha(db)
        result = run(db, ["demo"])  # a usage error: its usage line, then the error
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert "fresh database" in result.stderr.splitlines()[-1]
        assert sha(db) == before


# -- read-only databases ------------------------------------------------------------------------

def read_only_file(folder: Path) -> None:
    (folder / "good.db").chmod(0o444)


def read_only_folder(folder: Path) -> None:
    folder.chmod(0o555)


READ_ONLY = {"read-only-file": read_only_file, "read-only-folder": read_only_folder}


@pytest.fixture
def read_only_db(tmp_path, good_db, request):
    folder = tmp_path / "data"
    folder.mkdir()
    shutil.copy(good_db[0], folder / "good.db")
    READ_ONLY[request.param](folder)
    yield folder / "good.db"
    folder.chmod(0o755)
    (folder / "good.db").chmod(0o644)


@pytest.mark.parametrize("read_only_db", list(READ_ONLY), indirect=True)
@pytest.mark.parametrize("what,args", COMMANDS, ids=[" ".join(a) for _, a in COMMANDS])
def test_a_read_only_database_is_read_or_refused_as_read_only(tmp_path, good_db, read_only_db, what, args):
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"platform": "telegram", "chat_id": "42", "user_id": "42", "text": "hi"}\n')
    before = snapshot(read_only_db.parent)

    result = run(read_only_db, args, sid=good_db[1], jsonl=str(jsonl))

    assert "Traceback" not in result.output
    assert "not a turnlog" not in result.output
    if what == WRITES:
        assert_one_line_failure(result, 1, str(read_only_db), "read-only")
    else:
        assert result.exit_code == 0, (result.stdout, result.stderr)
        assert result.stdout.strip()
        assert len(result.stderr.splitlines()) <= 1, result.stderr
    assert snapshot(read_only_db.parent) == before  # no byte written, no empty -wal/-shm left


@pytest.mark.parametrize("read_only_db", ["read-only-file"], indirect=True)
def test_read_commands_show_the_read_only_data(read_only_db, good_db):
    result = run(read_only_db, ["show", KEY])
    assert result.exit_code == 0, result.stderr
    assert good_db[1] in result.stdout and "hello" in result.stdout and "hi there" in result.stdout
    assert KEY in run(read_only_db, ["sessions"]).stdout
    assert "hello" in run(read_only_db, ["search", "hello"]).stdout


def test_stale_read_models_of_a_read_only_database_are_read_with_a_note(tmp_path):
    db = tmp_path / "gw.db"
    with Turnlog(str(db)) as t:
        t.maintenance.catch_up()
        t.get_or_create_session(SessionSource(platform="discord", chat_id="7", user_id="7"))  # not caught up
    db.chmod(0o444)
    try:
        result = run(db, ["sessions"])
    finally:
        db.chmod(0o644)
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("\n") == 1 and "read-only" in result.stderr and "stale" in result.stderr
    assert result.stdout.strip() == "(none)"  # as of the read models' position


# -- a mistyped --db ------------------------------------------------------------------------------

@pytest.mark.parametrize("what,args", [c for c in COMMANDS if c[0] == READS],
                         ids=[" ".join(a) for w, a in COMMANDS if w == READS])
def test_a_read_command_on_a_missing_database_names_it_and_creates_nothing(tmp_path, what, args):
    db = tmp_path / "typo.db"
    result = run(db, args, sid="x", jsonl="x")
    if main.commands[args[0]].empty_when_missing:  # a dry run compares with the empty log a new database would be
        assert result.exit_code == 0 and "would import" in result.stdout, result.output
    else:
        assert_one_line_failure(result, 1, str(db), "no turnlog database")
    assert list(tmp_path.iterdir()) == []


def test_a_writing_command_creates_a_marked_database(tmp_path):
    db = tmp_path / "new.db"
    assert run(db, ["route", *ROUTE]).exit_code == 0
    assert dbfile.identify(str(db)).kind == "turnlog"
    assert KEY in run(db, ["sessions"]).stdout


# -- the Python API ----------------------------------------------------------------------------

def test_the_api_refuses_a_foreign_eventsourcing_database_without_writing(tmp_path):
    db = tmp_path / "other.db"
    make_foreign_eventsourcing(db, db)
    before = snapshot(tmp_path)
    for read_only in (False, True):
        with pytest.raises(StoreError, match="not a turnlog one"):
            Turnlog(str(db), read_only=read_only)
    assert snapshot(tmp_path) == before


def test_read_only_open_writes_nothing_even_where_it_could(tmp_path, good_db):
    """On a writable file with no -wal, a read-only open still writes nothing to the file."""
    db = tmp_path / "good.db"
    shutil.copy(good_db[0], db)
    before = sha(db)
    with Turnlog(str(db), read_only=True) as t:
        assert [s.session_key for s in t.sessions()] == [KEY]
        assert t.maintenance.catch_up() == 0 and t.maintenance.seal() == 0
        with pytest.raises(StoreError, match="read-only"):
            t.get_or_create_session(SessionSource(platform="slack", chat_id="C1", user_id="U1", scope_id="T1"))
        with pytest.raises(StoreError, match="read-only"):
            t.maintenance.rebuild()
    assert sha(db) == before


def test_read_only_open_reads_a_live_database_as_a_writer_writes_it(tmp_path):
    db = tmp_path / "live.db"
    with Turnlog(str(db)) as writer:
        writer.handle_message(alice("m1"), "hello", agent, lambda text: None)
        writer.maintenance.catch_up()
        with Turnlog(str(db), read_only=True) as reader:
            assert len(reader.sessions()) == 1
            writer.handle_message(SessionSource(platform="discord", chat_id="9", user_id="9"), "yo", agent,
                                  lambda text: None)
            writer.maintenance.catch_up()
            assert len(reader.sessions()) == 2  # through the live write-ahead log
            assert reader.transcript(writer.sessions()[1].session_id)[0]["content"] == "yo"


def test_a_database_from_the_previous_version_is_adopted_and_marked_when_written(tmp_path, good_db):
    db = tmp_path / "old.db"
    shutil.copy(good_db[0], db)
    conn = sqlite3.connect(db)
    conn.execute("DROP TABLE turnlog_meta")  # what turnlog wrote before the marker existed
    conn.commit()
    conn.close()
    assert dbfile.identify(str(db)).kind == "legacy"
    before = sha(db)
    with Turnlog(str(db), read_only=True) as t:  # read-only: adopted, not marked
        assert t.sessions()[0].session_key == KEY
    assert sha(db) == before and dbfile.identify(str(db)).kind == "legacy"
    assert run(db, ["sessions"]).exit_code == 0  # a read command on a writable file may mark it
    with Turnlog(str(db)) as t:
        assert t.sessions()[0].session_key == KEY
    assert dbfile.identify(str(db)).kind == "turnlog"


def test_a_legacy_looking_file_with_foreign_events_is_refused(tmp_path, good_db):
    db = tmp_path / "mixed.db"
    shutil.copy(good_db[0], db)
    conn = sqlite3.connect(db)
    conn.execute("DROP TABLE turnlog_meta")
    conn.execute("UPDATE stored_events SET topic='otherapp.domain:Dog.Registered' WHERE rowid=1")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a turnlog one"):
        Turnlog(str(db))


def test_a_database_of_a_newer_format_is_refused(tmp_path, good_db):
    db = tmp_path / "future.db"
    shutil.copy(good_db[0], db)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE turnlog_meta SET value='99' WHERE key='format_version'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer turnlog"):
        Turnlog(str(db))


def test_permission_bits_make_a_file_read_only_even_for_root(tmp_path):
    db = tmp_path / "x.db"
    db.write_bytes(b"")
    assert dbfile.writable(str(db))
    db.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    assert not dbfile.writable(str(db))
    db.chmod(0o644)
    tmp_path.chmod(0o555)
    try:
        assert not dbfile.writable(str(db))
    finally:
        tmp_path.chmod(0o755)
    assert os.access(db, os.W_OK)


def test_the_table_covers_every_command():
    """A new command joins the table above (or the list of those that open no database)."""
    import click

    ctx = click.Context(main)
    # `web` serves until stopped; its bad databases are tested in test_web_cli.py. `restore`
    # replaces the file at --db instead of opening it (tests/cli/test_backup_cli.py).
    opening = {name for name in main.list_commands(ctx)} - {"key", "bench", "demo", "web", "restore"}
    assert opening == {args[0] for _, args in COMMANDS}


def test_a_database_damaged_inside_is_named_as_damaged(tmp_path):
    db = tmp_path / "damaged.db"
    with Turnlog(str(db), encryption=False) as t:
        for i in range(200):
            t.handle_message(alice(f"m{i}"), f"hello {i} " + "words " * 40, agent, lambda text: None)
    data = bytearray(db.read_bytes())
    page = 4096
    for start in range(len(data) // 4 // page * page, len(data) * 3 // 4, 8 * page):  # every 8th page of its middle
        data[start:start + page] = b"\xde\xad\xbe\xef" * (page // 4)  # the header (page 1) intact
    db.write_bytes(bytes(data))
    for args in (["verify"], ["verify", "--chain"], ["rebuild", "--all"]):
        result = run(db, args)
        assert_one_line_failure(result, 1, str(db), "is damaged")
        assert "DatabaseError" not in result.stderr and "TURNLOG_DEBUG" not in result.stderr


def test_a_log_damaged_where_its_events_are_is_named_as_damaged(tmp_path):
    # The file opens (its header, schema and marker are whole); reading the events meets the damage.
    db = tmp_path / "damaged.db"
    with Turnlog(str(db), encryption=False) as t:
        for i in range(100):
            t.handle_message(alice(f"m{i}"), f"hello {i} " + "words " * 40, agent, lambda text: None)
    conn = sqlite3.connect(db)
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = 'stored_events' AND pagetype = 'leaf'")]
    conn.close()
    data = bytearray(db.read_bytes())
    for page in pages[len(pages) // 2:]:
        data[(page - 1) * size:page * size] = b"\xde\xad\xbe\xef" * (size // 4)
    db.write_bytes(bytes(data))
    for args in (["verify", "--chain"], ["rebuild", "--all"]):
        result = run(db, args)
        assert_one_line_failure(result, 1, str(db), "is damaged")
        assert "DatabaseError" not in result.stderr and "TURNLOG_DEBUG" not in result.stderr
