"""Moving a log between backends (Turnlog.copy_to): SQLite -> PostgreSQL -> SQLite gives back
every session's export, the same positions, and a chain that verifies on each store."""

from __future__ import annotations

import base64
import itertools
import sqlite3

import pytest

from postgres_server import create_database, server
from turnlog import InvalidRequest, StoreError, Turnlog

from chat import BOB, alice, collect, echo

_names = itertools.count()


@pytest.fixture(scope="module")
def pg():
    with server() as prefix:
        yield prefix


@pytest.fixture
def url(pg):
    return create_database(pg, f"copied_{next(_names)}")


def talk(t: Turnlog, turns: int = 4) -> None:
    sent: list[str] = []
    for i in range(turns):
        t.handle_message(alice(f"a{i}"), f"hello {i}", echo, collect(sent))
        t.handle_message(BOB, f"bob {i}", echo, collect(sent))
    t.handle_message(alice("reset"), "/new", echo, collect(sent))
    t.handle_message(alice("after"), "a new session", echo, collect(sent))

MASTER_KEY = base64.b64encode(bytes(range(32))).decode()


def exports(t: Turnlog) -> dict[str, dict]:
    return {s.session_id: t.export(s.session_id) for s in t.sessions()}


def positions(t: Turnlog) -> list[tuple[int, str, str]]:
    return [(e.position, e.event, e.session_id or "") for e in t.events_around(1, before=0, after=10_000)]


def test_sqlite_to_postgresql_to_sqlite_gives_back_every_session_and_a_verifying_chain(tmp_path, url, monkeypatch):
    monkeypatch.setenv("TURNLOG_MASTER_KEY", MASTER_KEY)  # the encrypted log's key, on both sides of the copy
    with Turnlog(tmp_path / "first.db") as t:
        talk(t)
        before, log = exports(t), positions(t)
        there = t.copy_to(url, views=str(tmp_path / "pg-views.db"))
    assert there.copied == there.events == there.head == log[-1][0] and there.resumed_from == 0
    assert there.chain_ok and "search" in there.read_models
    with Turnlog(url, views=str(tmp_path / "pg-views.db")) as pg_log:
        assert exports(pg_log) == before and positions(pg_log) == log
        assert pg_log.maintenance.verify_chain().breaks == []
        back = pg_log.copy_to(tmp_path / "back.db")
        assert pg_log.search("hello")  # the search index was rebuilt there
    assert back.events == there.events
    with Turnlog(tmp_path / "back.db") as t:
        assert exports(t) == before and positions(t) == log
        report = t.maintenance.verify_chain()
        assert report.breaks == [] and report.sealed_late is None
        assert t.maintenance.verify()["ok"]
        talk(t, 1)  # a gateway goes on writing the copy, sealing after the copied chain
        assert t.maintenance.verify_chain().breaks == []


def test_a_copied_postgresql_log_takes_new_events_after_the_copied_positions(tmp_path, url, monkeypatch):
    monkeypatch.setenv("TURNLOG_MASTER_KEY", MASTER_KEY)  # the encrypted log's key, on both sides of the copy
    with Turnlog(tmp_path / "a.db") as t:
        talk(t, 1)
        head = t.maintenance.log_head()
        t.copy_to(url, views=str(tmp_path / "v.db"))
    with Turnlog(url, views=str(tmp_path / "v.db")) as pg_log:
        talk(pg_log, 1)  # without the sequence moved on, the first insert would collide with position 1
        after = [p for p, _, _ in positions(pg_log)]
        assert after[:head] == list(range(1, head + 1)) and len(after) > head and after == sorted(set(after))
        assert pg_log.maintenance.verify_chain().breaks == []


def test_a_second_copy_copies_nothing_and_a_different_log_is_refused(tmp_path):
    with Turnlog(tmp_path / "a.db") as t:
        talk(t, 1)
        first = t.copy_to(tmp_path / "b.db")
        again = t.copy_to(tmp_path / "b.db")
        assert (again.copied, again.resumed_from, again.events) == (0, first.head, first.events)
        for itself in (tmp_path / "a.db", f"{tmp_path}/./a.db"):
            with pytest.raises(InvalidRequest, match="the source itself"):
                t.copy_to(itself)
    with Turnlog(tmp_path / "other.db") as other:
        talk(other, 2)
        with pytest.raises(StoreError, match="not this one|goes on past"):
            other.copy_to(tmp_path / "b.db")
    conn = sqlite3.connect(tmp_path / "b.db")
    assert conn.execute("SELECT count(*), count(DISTINCT rowid) FROM stored_events").fetchone() == (first.events,) * 2
    conn.close()
