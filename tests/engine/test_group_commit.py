"""Group commit: saves made by threads of one process while another save commits share a transaction.

A group is lined up deterministically: the first save is held inside its transaction (a wrapper
of the recorder's insert_events) until the saves of the other threads are queued behind it; then
it is let go and the next leader writes the queued saves together. What each transaction wrote is
read from the same wrapper. Two Turnlogs on one file act as two processes (a lease moved by the
other one makes this one's fenced write stale).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import warnings
from typing import Any, Callable

import pytest

from turnlog import EngineConfig, SessionSource, StaleLease, Turnlog
from turnlog.aio import AsyncTurnlog

from chat import ALICE

WAIT_S = 30.0  # a bound on waits for other threads, never reached when things work


def source(n: int) -> SessionSource:
    return SessionSource(platform="telegram", chat_type="dm", chat_id=f"{100 + n}", user_id=f"{100 + n}",
                         message_id=f"m{n}")


def internals(t: Turnlog) -> tuple[Any, Any]:
    """The recorder and the group committer (through the deprecated attributes: no public face)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return t.app.recorder, t.ctx.commits


class Transactions:
    """Records what each write transaction inserted; can hold the next one open until told."""

    def __init__(self, t: Turnlog) -> None:
        self.recorder, self.commits = internals(t)
        self.written: list[list[str]] = []  # per committed transaction: its events' topics
        self.failed: list[list[str]] = []
        self._hold: tuple[threading.Event, threading.Event] | None = None
        original = self.recorder.insert_events

        def insert_events(stored_events: Any, **kwargs: Any) -> Any:
            hold, self._hold = self._hold, None
            if hold is not None:
                hold[0].set()
                assert hold[1].wait(WAIT_S)
            topics = [s.topic.rpartition(":")[2].rpartition(".")[2] for s in stored_events]
            try:
                positions = original(stored_events, **kwargs)
            except Exception:
                self.failed.append(topics)
                raise
            self.written.append(topics)
            return positions
        self.recorder.insert_events = insert_events

    def hold_next(self, entered: threading.Event, release: threading.Event) -> None:
        """The next transaction sets `entered`, then waits for `release` before it writes."""
        self._hold = (entered, release)

    def group_behind(self, first: Callable[[], Any], others: list[Callable[[], Any]]) -> list[Any]:
        """Run `first` in a thread, hold its transaction until every one of `others` (each in its
        own thread) is queued behind it, then let it go; returns each call's result or exception."""
        entered, release = threading.Event(), threading.Event()
        self.hold_next(entered, release)
        results: list[Any] = [None] * (1 + len(others))

        def call(i: int, fn: Callable[[], Any]) -> None:
            try:
                results[i] = fn()
            except Exception as e:  # noqa: BLE001 - the test looks at it
                results[i] = e
        threads = [threading.Thread(target=call, args=(0, first))]
        threads[0].start()
        assert entered.wait(WAIT_S)
        for i, fn in enumerate(others, start=1):
            threads.append(threading.Thread(target=call, args=(i, fn)))
            threads[-1].start()
        assert self.commits.wait_queued(len(others), WAIT_S)
        release.set()
        for thread in threads:
            thread.join(WAIT_S)
        return results


def test_saves_queued_behind_a_commit_are_written_in_one_transaction(make_turnlog):
    t = make_turnlog()
    tx = Transactions(t)
    results = tx.group_behind(lambda: t.accept(source(0), "first"),
                              [lambda n=n: t.accept(source(n), f"hello {n}") for n in range(1, 6)])
    assert not [r for r in results if isinstance(r, Exception)]
    # the first accept alone, then the five queued behind it in one transaction
    assert [topics.count("InboundAccepted") for topics in tx.written] == [1, 5]
    assert tx.failed == []
    assert {s.chat_id for s in t.pending_inbound()} == {f"{100 + n}" for n in range(6)}


def test_a_stale_member_fails_alone_and_the_others_are_written(make_turnlog):
    config = EngineConfig(lease_ttl_s=30.0, lease_timeout_s=0.05)
    a = make_turnlog(config=config, owner="gateway-a")
    b = make_turnlog(config=config, owner="gateway-b")
    routed = a.get_or_create_session(ALICE)
    token = a.turns.acquire_lease(routed.session_id, routed.session_key, timeout=0.05)
    a.turns.append_message(token, "user", "hello")
    assert b.command(ALICE, "/stop").changed is True  # the other process revokes the lease
    tx = Transactions(a)
    stale = lambda: a.turns.append_message(token, "assistant", "late reply")  # noqa: E731
    accepts = [lambda n=n: a.accept(source(n), f"hello {n}") for n in range(1, 4)]
    results = tx.group_behind(lambda: a.accept(source(0), "first"), [accepts[0], stale, *accepts[1:]])

    assert isinstance(results[2], StaleLease)
    assert not [r for i, r in enumerate(results) if i != 2 and isinstance(r, Exception)]
    # the group's transaction failed on the stale renewal, then each member was written alone
    assert len(tx.failed) == 2 and "LeaseRenewed" in tx.failed[0] and tx.failed[0].count("InboundAccepted") == 3
    assert [topics.count("InboundAccepted") for topics in tx.written] == [1, 1, 1, 1]
    assert [m["content"] for m in b.transcript(routed.session_id)] == ["hello"]
    assert {s.chat_id for s in a.pending_inbound()} >= {f"{100 + n}" for n in range(4)}


def test_fencing_is_checked_per_member_of_a_group(make_turnlog):
    """Two fenced writes in one group, one stale: the fresh one's message is written, under its epoch."""
    config = EngineConfig(lease_ttl_s=30.0, lease_timeout_s=0.05)
    a = make_turnlog(config=config, owner="gateway-a")
    b = make_turnlog(config=config, owner="gateway-b")
    stale_routed = a.get_or_create_session(ALICE)
    stale = a.turns.acquire_lease(stale_routed.session_id, stale_routed.session_key, timeout=0.05)
    assert b.command(ALICE, "/stop").changed is True
    fresh_routed = a.get_or_create_session(source(7))
    fresh = a.turns.acquire_lease(fresh_routed.session_id, fresh_routed.session_key, timeout=0.05)
    tx = Transactions(a)
    results = tx.group_behind(lambda: a.accept(source(0), "first"), [
        lambda: a.turns.append_message(stale, "user", "stale write"),
        lambda: a.turns.append_message(fresh, "user", "fresh write")])

    assert isinstance(results[1], StaleLease)
    assert results[2].seq == 1
    assert [(m["content"], m["epoch"]) for m in b.transcript(fresh_routed.session_id)] == [
        ("fresh write", fresh.epoch)]
    assert b.transcript(stale_routed.session_id) == []


def test_concurrent_keys_keep_each_keys_order_through_grouped_commits(db):
    """Twenty keys' turns in flight through the asyncio API; each key's transcript is its
    messages in order, each answered, and some of the saves were grouped."""
    keys, turns = 20, 6

    async def run() -> tuple[Turnlog, int]:
        t = Turnlog(db, owner="gw")
        at = AsyncTurnlog(t, store_threads=4, threads=keys)
        sent: dict[int, list[str]] = {n: [] for n in range(keys)}

        async def lane(n: int) -> None:
            for i in range(turns):
                async def agent(history: Any, item: Any) -> str:
                    await asyncio.sleep(0)
                    return f"re: {item.text}"

                async def send(text: str, n: int = n) -> None:
                    sent[n].append(text)
                await at.handle_message(dataclasses.replace(source(n), message_id=f"k{n}m{i}"), f"{n}.{i}",
                                        agent, send)
        await asyncio.gather(*(lane(n) for n in range(keys)))
        assert sent == {n: [f"re: {n}.{i}" for i in range(turns)] for n in range(keys)}
        _, commits = internals(t)
        grouped = commits.grouped
        await at.close()
        return t, grouped

    _, grouped = asyncio.run(run())
    assert grouped > 0
    with Turnlog(db) as t:
        for n in range(keys):
            routed = t.get_or_create_session(source(n))
            contents = [m["content"] for m in t.transcript(routed.session_id)]
            assert contents == [x for i in range(turns) for x in (f"{n}.{i}", f"re: {n}.{i}")]


def test_group_commit_can_be_turned_off(make_turnlog, monkeypatch):
    """Off, saves made while another is held in its transaction do not wait for it: each commits alone."""
    monkeypatch.setenv("TURNLOG_GROUP_COMMIT", "0")
    t = make_turnlog()
    tx = Transactions(t)
    entered, release = threading.Event(), threading.Event()
    tx.hold_next(entered, release)
    first = threading.Thread(target=t.accept, args=(source(0), "first"))
    first.start()
    assert entered.wait(WAIT_S)
    others = [threading.Thread(target=t.accept, args=(source(n), f"hello {n}")) for n in range(1, 4)]
    for thread in others:
        thread.start()
    for thread in others:
        thread.join(WAIT_S)
    assert not [thread for thread in others if thread.is_alive()]
    release.set()
    first.join(WAIT_S)
    assert [topics.count("InboundAccepted") for topics in tx.written] == [1, 1, 1, 1]
