"""An asyncio caller cancelled while its turn waits for the lease: its accepted message is left to
the next run (never started with nobody to answer it), and status lists no expired lease as a
running turn. The dead holder is a lease of another owner that the injected clock expires; the
moment to cancel is read from the clock (the waiting turn asks it for the lease's time)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from turnlog import EngineConfig, ManualClock, Turnlog
from turnlog.aio import AsyncTurnlog

from chat import alice

TTL_S = 30.0
WAIT_S = 30.0  # a bound on every wait below, never a pause


class WatchedClock(ManualClock):
    """A manual clock that tells when a lease's expiry was last judged by it."""

    def __init__(self) -> None:
        super().__init__()
        self.judged = threading.Event()

    def lease_now(self):
        self.judged.set()
        return self.now()


@pytest.fixture
def clock():
    return WatchedClock()


@pytest.fixture
def t(make_turnlog):
    return make_turnlog(owner="gateway-a", config=EngineConfig(lease_ttl_s=TTL_S, lease_timeout_s=600))


def test_a_cancelled_call_leaves_its_message_to_the_next_run(t, db, clock):
    session_id = t.get_or_create_session(alice("m-1")).session_id
    with Turnlog(db, clock=clock, owner="dead-gateway") as dead:
        dead.acquire_lease(session_id, t.routing_key(alice("m-1")))  # and it never renews it
    asked: list[str] = []
    sent: list[str] = []

    async def agent(history, item):
        asked.append(item.text)
        return f"re: {item.text}"

    async def send(text):
        sent.append(text)

    async def cancelled_call() -> None:
        # One store slot: a store call queued behind the waiting turn runs only once that turn gave up.
        at = AsyncTurnlog(t, store_threads=1)
        clock.judged.clear()
        call = asyncio.create_task(at.handle_message(alice("m-1"), "hello", agent, send))
        assert await asyncio.to_thread(clock.judged.wait, WAIT_S), "the turn never looked at the lease"
        call.cancel()  # accepted, waiting for the dead gateway's lease
        with pytest.raises(asyncio.CancelledError):
            await call
        clock.advance(TTL_S + 1)  # the dead gateway's lease expires
        await asyncio.wait_for(at.run(lambda: None), WAIT_S)  # the waiting turn has ended
    asyncio.run(cancelled_call())

    assert asked == [] and sent == []
    assert [item["state"] for item in t.queue(alice("m-1"))] == ["pending"]  # not started with nobody to answer it
    status = t.status()
    assert status["active_turns"] == []
    assert [lease["owner"] for lease in status["expired_leases"]] == ["dead-gateway"]

    # The next drain of the queue answers it.
    outcomes = [t.run_next(source, lambda history, item: f"re: {item.text}", sent.append)
                for source in t.pending_inbound()]
    assert [o.session_id for o in outcomes if o] == [session_id] and sent == ["re: hello"]
    assert t.queue(alice("m-1")) == [] and t.status()["active_turns"] == []


def test_status_lists_a_lease_its_holder_left_to_expire_apart_from_running_turns(t, db, clock):
    session_id = t.get_or_create_session(alice("m-1")).session_id
    token = t.acquire_lease(session_id, t.routing_key(alice("m-1")))
    assert [lease["session_id"] for lease in t.status()["active_turns"]] == [session_id]

    clock.advance(TTL_S)  # nobody renewed it

    status = t.status()
    assert status["active_turns"] == []
    assert [(lease["session_id"], lease["epoch"]) for lease in status["expired_leases"]] == [(session_id, token.epoch)]
