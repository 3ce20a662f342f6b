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
from typing import Any

from grouping import WAIT_S, Transactions, internals, source
from turnlog import EngineConfig, StaleLease, Turnlog
from turnlog.aio import AsyncTurnlog

from chat import ALICE


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
    messages in order, each answered. The saves were grouped, more of them to a group than the
    two store slots: a save waiting for its group gives its slot back, so other keys' saves join."""
    keys, turns = 20, 6

    async def run() -> tuple[Turnlog, float]:
        t = Turnlog(db, owner="gw")
        at = AsyncTurnlog(t, store_threads=2, threads=keys)
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
        grouped = commits.grouped / max(commits.groups, 1)
        await at.close()
        return t, grouped

    _, per_group = asyncio.run(run())
    assert per_group > 2
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
