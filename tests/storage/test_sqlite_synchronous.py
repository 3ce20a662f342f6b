"""The SQLite connections of the event store get the synchronous mode turnlog chooses
(storage/sqlite_factory.py): NORMAL by default, TURNLOG_SQLITE_SYNCHRONOUS otherwise."""

from __future__ import annotations

import pytest
from eventsourcing.utils import Environment

from turnlog.storage.sqlite_factory import TurnlogSQLiteFactory

MODES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def synchronous_of_a_pool_connection(path: str) -> str:
    factory = TurnlogSQLiteFactory(Environment(env={"SQLITE_DBNAME": path}))
    pool = factory.datastore.pool
    conn = pool.get_connection()
    try:
        with conn.cursor() as cursor:
            cursor.execute("PRAGMA synchronous")
            return MODES[cursor.fetchone()[0]]
    finally:
        pool.put_connection(conn)
        factory.close()


def test_normal_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv("TURNLOG_SQLITE_SYNCHRONOUS", raising=False)
    assert synchronous_of_a_pool_connection(str(tmp_path / "log.db")) == "NORMAL"


@pytest.mark.parametrize("mode", ["FULL", "off"])
def test_the_environment_chooses(tmp_path, monkeypatch, mode):
    monkeypatch.setenv("TURNLOG_SQLITE_SYNCHRONOUS", mode)
    assert synchronous_of_a_pool_connection(str(tmp_path / "log.db")) == mode.upper()
