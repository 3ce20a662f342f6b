"""Backup and restore of an SQLite log (Turnlog.backup, turnlog.restore), and a PostgreSQL log's
pg_dump/pg_restore round trip as docs/operations.md tells it.

The backup under load is taken while three real gateway processes write turns; restore is
refused while a real process has the database open.
"""

from __future__ import annotations

import hashlib
import itertools
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

import turnlog
from harness import procs
from postgres_server import binaries, create_database, server
from turnlog import DatabaseInUse, StoreError, Turnlog

from chat import ALICE, BOB, alice, collect, echo

WRITER = """
import os
from turnlog import SessionSource
t = kit.turnlog(owner=f"writer-{os.getpid()}")
source = SessionSource(platform="telegram", chat_type="dm", chat_id=f"chat-{os.getpid()}", user_id="7")
turns = 0
while not (kit.work / "stop").exists():
    t.handle_message(source, f"message {turns}", lambda history, item: "re: " + item.text, lambda *a: None)
    turns += 1
    if turns == 3:
        kit.ready(f"writing-{os.getpid()}")
t.close()
print(turns)
"""

HOLDER = """
from turnlog import SessionSource
t = kit.turnlog(owner="holder")
t.handle_message(SessionSource(platform="telegram", chat_id="9", user_id="9"), "hi", lambda h, i: "yo",
                 lambda *a: None)
kit.ready()
kit.hang()
"""


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def talk(t: Turnlog, turns: int = 3) -> None:
    sent: list[str] = []
    for i in range(turns):
        t.handle_message(alice(f"a{i}"), f"hello {i}", echo, collect(sent))
        t.handle_message(BOB, f"bob {i}", echo, collect(sent))


def exports(t: Turnlog) -> dict[str, dict]:
    return {s.session_id: t.export(s.session_id) for s in t.sessions()}


def test_a_backup_taken_while_three_processes_write_is_consistent_and_verifies(tmp_path):
    db = tmp_path / "live.db"
    with Turnlog(db) as t:
        talk(t, 1)
    writers = [procs.start(db, WRITER, work=tmp_path) for _ in range(3)]
    try:
        for w in writers:
            procs.wait_for(tmp_path / f"writing-{w.pid}.json", w)
        with Turnlog(db) as t:
            before = t.maintenance.log_head()
            report = t.backup(tmp_path / "backup.db")
        (tmp_path / "stop").touch()
        turns = [int(w.communicate(timeout=procs.CHILD_TIMEOUT_S)[0]) for w in writers]
    finally:
        for w in writers:
            if w.poll() is None:
                w.kill()
    assert all(w.returncode == 0 for w in writers) and all(n >= 3 for n in turns)
    with Turnlog(db) as t:
        after = t.maintenance.log_head()
    # Taken while they wrote: it holds what was written before it began, and they went on after it.
    assert before <= report.head < after
    assert report.chain_ok and report.events == report.head  # no position missing
    assert report.sha256 == sha256(tmp_path / "backup.db") and report.bytes == (tmp_path / "backup.db").stat().st_size
    with Turnlog(db, read_only=True) as t:
        assert report.key_fingerprint == t.key_fingerprint is not None  # encrypted by default: it names its key
    restored = tmp_path / "restored.db"
    turnlog.restore(tmp_path / "backup.db", restored, key_file=f"{db}.key")
    with Turnlog(restored) as copy:
        assert copy.maintenance.verify_chain().breaks == []
        assert copy.maintenance.log_head() == report.head
        assert copy.maintenance.verify()["ok"]  # the read models it carried agree with its log
        # Every session of each writer is in it, each transcript a whole prefix of turns.
        chats = {s.session_key for s in copy.sessions()}
        assert {f"agent:main:telegram:dm:chat-{w.pid}" for w in writers} <= chats
    assert not list(tmp_path.glob(".backup.db.*"))  # no temporary file left beside it


def test_a_restored_backup_gives_back_every_session_as_it_was(tmp_path):
    with Turnlog(tmp_path / "a.db") as t:
        talk(t)
        before = exports(t)
        report = t.backup(tmp_path / "backup.db")
        talk(t, 1)  # written after the backup: not in it
    turnlog.restore(tmp_path / "backup.db", tmp_path / "a.db", force=True)
    with Turnlog(tmp_path / "a.db") as t:
        assert exports(t) == before
        assert t.maintenance.log_head() == report.head
        assert t.maintenance.verify_chain().breaks == []
        talk(t, 1)  # and gateways go on writing it, the chain sealed on
        assert t.maintenance.verify_chain().breaks == [] and t.maintenance.verify_chain().sealed_late is None


def test_restore_refuses_a_database_in_use(tmp_path):
    db = tmp_path / "live.db"
    with Turnlog(db) as t:
        talk(t, 1)
        t.backup(tmp_path / "backup.db")
        talk(t, 1)
    holder = procs.start(db, HOLDER, work=tmp_path)
    try:
        procs.wait_for(tmp_path / "ready.json", holder)
        with pytest.raises(DatabaseInUse, match=f"in use by process {holder.pid}"):
            turnlog.restore(tmp_path / "backup.db", db, force=True)
    finally:
        holder.kill()
        holder.communicate()  # waits, and closes its pipes
    # Not replaced: the holder's own session (which the backup lacks) is still there.
    with Turnlog(db) as t:
        assert "agent:main:telegram:dm:9" in {s.session_key for s in t.sessions()}
    assert not list(tmp_path.glob(".live.db.*"))
    report = turnlog.restore(tmp_path / "backup.db", db, force=True)  # nobody holds it now
    assert report.replaced


def test_restore_verifies_the_backup_before_touching_the_database(tmp_path):
    with Turnlog(tmp_path / "a.db") as t:
        talk(t, 1)
        t.backup(tmp_path / "backup.db")
    conn = sqlite3.connect(tmp_path / "backup.db")
    with conn:
        conn.execute("UPDATE stored_events SET state = zeroblob(length(state)) WHERE rowid = 3")
    conn.close()
    unchanged = sha256(tmp_path / "a.db")
    with pytest.raises(StoreError, match="does not verify"):
        turnlog.restore(tmp_path / "backup.db", tmp_path / "a.db", force=True)
    assert sha256(tmp_path / "a.db") == unchanged
    with pytest.raises(StoreError, match="exists: give --force"):
        turnlog.restore(tmp_path / "a.db", tmp_path / "a.db")


def test_a_backup_never_replaces_a_file_and_needs_an_sqlite_log(tmp_path):
    with Turnlog(tmp_path / "a.db") as t:
        talk(t, 1)
        (tmp_path / "taken").write_text("mine")
        with pytest.raises(StoreError, match="exists"):
            t.backup(tmp_path / "taken")
        assert (tmp_path / "taken").read_text() == "mine"
    with pytest.raises(StoreError, match="no backup file"):
        turnlog.restore(tmp_path / "missing.db", tmp_path / "b.db")
    with pytest.raises(StoreError, match="pg_restore"):
        turnlog.restore(tmp_path / "a.db", "postgresql://localhost/x")


# -- PostgreSQL: pg_dump / pg_restore ------------------------------------------------------------

_names = itertools.count()


@pytest.fixture(scope="module")
def pg():
    with server() as prefix:
        yield prefix


def test_a_postgresql_log_is_backed_up_with_pg_dump_and_restored_with_pg_restore(pg, tmp_path):
    url = create_database(pg, f"dumped_{next(_names)}")
    with Turnlog(url, views=str(tmp_path / "views.db")) as t:
        talk(t)
        before = exports(t)
        with pytest.raises(StoreError, match="pg_dump"):
            t.backup(tmp_path / "nope.db")
    bin_dir = binaries()
    tools = [str(bin_dir / name) if (bin_dir / name).exists() else shutil.which(name) for name in
             ("pg_dump", "pg_restore")]
    dump = tmp_path / "log.dump"
    subprocess.run([tools[0], "--format=custom", f"--file={dump}", f"--dbname={url}"], check=True)
    restored = create_database(pg, f"restored_{next(_names)}")
    subprocess.run([tools[1], "--no-owner", f"--dbname={restored}", str(dump)], check=True)
    # A new read-model file: the read models and the chain's seals are rebuilt from the log.
    with Turnlog(restored, views=str(tmp_path / "views-restored.db")) as t:
        assert exports(t) == before
        assert t.maintenance.verify_chain().breaks == []
        talk(t, 1)  # the position sequence came along: new events go after the restored ones
        assert t.maintenance.verify_chain().breaks == []
