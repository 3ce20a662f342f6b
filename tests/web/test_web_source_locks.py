"""A reload reads the source database under SQLite's locks: a writer's transaction in progress
is never read half-done, and the source folder gains no file."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
from contextlib import closing, contextmanager
from typing import Iterator

import pytest
from starlette.testclient import TestClient

import web_db
from turnlog.web import store
from turnlog.web.app import create_app

BASE = "http://127.0.0.1"


@pytest.fixture
def data(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # the snapshot copies, apart from the source
    folder = tmp_path / "data"
    folder.mkdir()
    db = str(folder / "log.db")
    web_db.build(db)
    return db


@contextmanager
def writing(db: str) -> Iterator[None]:
    """Another connection in the middle of a write transaction: every event overwritten, not
    committed. With a cache of two pages, SQLite spills the changes into the file itself (a
    rollback-journal database), holding its exclusive lock until the transaction ends."""
    w = sqlite3.connect(db, isolation_level=None)
    try:
        w.execute("PRAGMA cache_size=2")
        w.execute("BEGIN IMMEDIATE")
        w.execute("UPDATE stored_events SET state = zeroblob(length(state))")
        yield
        w.execute("ROLLBACK")
    finally:
        w.close()


def sessions(c: TestClient) -> list:
    r = c.get("/sessions?format=json")
    assert r.status_code == 200, r.text[:300]
    return r.json()["sessions"]


def test_a_reload_while_a_rollback_journal_database_is_mid_write_is_busy_not_torn(data, monkeypatch):
    with closing(sqlite3.connect(data)) as c:  # what a restored backup is: no WAL
        assert c.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    monkeypatch.setattr(store, "LOCK_WAIT_S", 0.1, raising=False)  # how long a reload waits for the lock
    folder = os.path.dirname(data)
    with TestClient(create_app(data), base_url=BASE) as c:
        committed = sessions(c)
        with open(data, "rb") as f:
            before = f.read()
        files = sorted(os.listdir(folder))
        with writing(data):
            with open(data, "rb") as f:
                assert f.read() != before  # the uncommitted changes are in the file now
            r = c.post("/reload", follow_redirects=False)
            assert r.status_code == 503 and "is being written" in r.text, r.text[:300]
            assert sessions(c) == committed  # the snapshot it had
        assert c.post("/reload", follow_redirects=False).status_code == 303
        assert sessions(c) == committed
    assert sorted(os.listdir(folder)) == files


def test_a_reload_while_a_wal_database_is_mid_write_reads_the_committed_state(data):
    folder = os.path.dirname(data)
    with TestClient(create_app(data), base_url=BASE) as c:
        committed = sessions(c)
        with writing(data):
            files = sorted(os.listdir(folder))  # the writer's -wal and -shm
            assert c.post("/reload", follow_redirects=False).status_code == 303
            assert sessions(c) == committed
            assert sorted(os.listdir(folder)) == files
    assert sorted(os.listdir(folder)) == ["log.db", "log.db.key"]


def test_a_reload_after_a_writer_died_mid_commit_says_so_and_keeps_its_snapshot(data):
    with closing(sqlite3.connect(data)) as c:
        assert c.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    folder = os.path.dirname(data)
    with TestClient(create_app(data), base_url=BASE) as c:
        committed = sessions(c)
        # A writer that dies with its changes spilled into the file: the journal beside it is hot.
        died = subprocess.run([sys.executable, "-c", DIES_MID_COMMIT, data], capture_output=True, text=True)
        assert died.returncode == 0, died.stderr
        files = sorted(os.listdir(folder))
        assert "log.db-journal" in files
        r = c.post("/reload", follow_redirects=False)
        assert r.status_code == 400 and "a writer stopped mid-commit" in r.text, r.text[:300]
        assert sessions(c) == committed
        assert sorted(os.listdir(folder)) == files


DIES_MID_COMMIT = """
import os, sqlite3, sys
w = sqlite3.connect(sys.argv[1], isolation_level=None)
w.execute("PRAGMA cache_size=2")
w.execute("BEGIN IMMEDIATE")
w.execute("UPDATE stored_events SET state = zeroblob(length(state))")
os._exit(0)
"""
