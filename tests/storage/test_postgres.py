"""The same engine with its log in PostgreSQL: two gateways (each with its own read-model file)
share one log (search, the audit history, time travel, rebuild and verify in one story), and
processes open a new log at the same moment. Routing races, lease fencing and the rest of the
engine's promises run on both backends in tests/contract/.

A throwaway server is started from the Debian binaries (tests/postgres_server.py).
"""

from __future__ import annotations

import itertools
import multiprocessing
from typing import Any

import pytest

from postgres_server import RoundTrips, create_database, server
from turnlog import ManualClock, SequentialIds, Turnlog

from chat import ALICE, BOB, reply_with

PROCESSES = 4
_names = itertools.count()


@pytest.fixture(scope="module")
def pg():
    with server() as prefix:
        yield prefix


@pytest.fixture
def url(pg):
    return create_database(pg, f"turnlog_{next(_names)}")


def engines(url: str, tmp_path, clock: ManualClock) -> tuple[Turnlog, Turnlog]:
    ids = SequentialIds()
    a = Turnlog(url, views=str(tmp_path / "a.db"), clock=clock, session_ids=ids, owner="gateway-a")
    b = Turnlog(url, views=str(tmp_path / "b.db"), clock=clock, session_ids=ids, owner="gateway-b")
    return a, b


def test_two_gateways_share_one_postgres_log(url, tmp_path):
    clock = ManualClock("2026-03-01T10:00:00+00:00")
    a, b = engines(url, tmp_path, clock)
    try:
        clock.advance(5)
        a.handle_message(ALICE, "please check the 数据库迁移 kiwi", reply_with("kiwi checked"), lambda text: None)
        clock.advance(5)
        b.handle_message(BOB, "deploy the gateway", reply_with("deployed"), lambda text: None)

        # Each gateway's read models come from the one log.
        assert a.routes() == b.routes() and len(a.routes()) == 2
        assert [s.session_id for s in a.sessions()] == [s.session_id for s in b.sessions()]
        alice_session = a.get_or_create_session(ALICE).session_id
        assert [m["content"] for m in b.transcript(alice_session)] == ["please check the 数据库迁移 kiwi",
                                                                      "kiwi checked"]

        # Search, in the other gateway's read models.
        assert [h.session_id for h in b.search("kiwi")] == [alice_session, alice_session]
        assert [h.session_id for h in b.search("数据库")] == [alice_session]
        assert b.search("数据") and b.search("deploy")[0].platform == "slack"

        # The audit history says who did what, whichever gateway wrote it.
        history = b.history(a.routing_key(ALICE))
        assert {h.event for h in history} >= {"RouteRegistered", "SessionCreated", "LeaseAcquired",
                                              "MessageAppended", "DeliveryDelivered", "LeaseReleased"}
        assert all(h.actor and h.cause for h in history)
        assert history == a.history(a.routing_key(ALICE))

        # Time travel: before Bob's message the map had one route.
        registered = next(h.position for h in b.history(b.routing_key(BOB)) if h.event == "RouteRegistered")
        assert len(b.at(f"#{registered - 1}").routes()) == 1
        assert len(b.at(f"#{registered}").routes()) == 2

        # The read models rebuild from the PostgreSQL log and verify against it.
        before = (b.routes(), b.sessions(), b.ledger(), b.search("kiwi"))
        report = b.maintenance.rebuild()
        assert report["events"] == report["head"] and report["workers"] == 1
        assert (b.routes(), b.sessions(), b.ledger(), b.search("kiwi")) == before
        assert b.maintenance.verify()["ok"]
    finally:
        a.close()
        b.close()


def open_at_once(url: str, views: str, start: Any, reports: Any) -> None:
    try:
        start.wait(timeout=60)
        Turnlog(url, views=views).close()
        reports.put("opened")
    except BaseException as error:
        reports.put(repr(error))


def test_processes_opening_a_new_log_at_the_same_moment_all_open_it(url, tmp_path):
    spawn = multiprocessing.get_context("spawn")
    start, reports = spawn.Barrier(PROCESSES * 2), spawn.Queue()
    workers = [spawn.Process(target=open_at_once, args=(url, str(tmp_path / f"o{n}.db"), start, reports))
               for n in range(PROCESSES * 2)]
    for worker in workers:
        worker.start()
    try:
        outcomes = [reports.get(timeout=60) for _ in workers]
    finally:
        for worker in workers:
            worker.join(timeout=60)
    assert outcomes == ["opened"] * len(workers)


def test_a_save_waits_for_the_log_lock_a_writer_holds(url, tmp_path):
    """A save takes the log table's exclusive write lock in its one round trip, as the library's
    pipeline does, so positions are given in commit order: while another writer's insert is open
    (the lock a plain INSERT takes), a turn's save waits for it to commit instead of committing
    around it with a later position."""
    import threading

    import psycopg

    t = Turnlog(url, views=str(tmp_path / "a.db"), owner="gateway-a")
    try:
        t.handle_message(ALICE, "first", reply_with("one"), lambda text: None)
        with psycopg.connect(url, autocommit=False) as locker, psycopg.connect(url, autocommit=True) as watch:
            [table] = [r[0] for r in watch.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE '%\\_events'")]
            locker.execute(f"LOCK TABLE {table} IN ROW EXCLUSIVE MODE")
            done = threading.Event()
            turn = threading.Thread(target=lambda: (t.handle_message(BOB, "second", reply_with("two"),
                                                                     lambda text: None), done.set()))
            turn.start()
            waiting = False
            for _ in range(600):  # the save reaches the lock: a backend waits on it (at most ~60 s)
                waiting = watch.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                        " AND pid <> pg_backend_pid()").fetchone()[0] > 0
                if waiting or done.wait(0.1):
                    break
            assert waiting and not done.is_set()
            locker.commit()
            turn.join(60)
        assert done.is_set()
        assert [m["content"] for m in t.transcript(t.get_or_create_session(BOB).session_id)] == ["second", "two"]
    finally:
        t.close()


def test_a_turn_on_a_known_session_is_three_round_trips_to_the_server(url, tmp_path):
    """Its start (routing, lease, inbox item, message), its reply with the delivery obligation
    (before the send), and its finish (settled, released, completed): the finish decides from the
    session this process routed to instead of reading it again."""
    t = Turnlog(url, views=str(tmp_path / "a.db"), clock=ManualClock("2026-03-01T10:00:00+00:00"),
                session_ids=SequentialIds(), owner="gateway-a")
    try:
        t.handle_message(ALICE, "first", reply_with("one"), lambda text: None)
        counts = []
        for text in ("second", "third"):
            with RoundTrips() as trips:
                t.handle_message(ALICE, text, reply_with("ok"), lambda text: None)
            counts.append(trips.count)
        assert counts == [3, 3]
        assert [m["content"] for m in t.transcript(t.get_or_create_session(ALICE).session_id)] == \
            ["first", "one", "second", "ok", "third", "ok"]
    finally:
        t.close()

