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
        dead.turns.acquire_lease(session_id, t.routing_key(alice("m-1")))  # and it never renews it
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
    assert [item.state for item in t.queue(alice("m-1"))] == ["pending"]  # not started with nobody to answer it
    status = t.status()
    assert status.active_turns == []
    assert [lease.owner for lease in status.expired_leases] == ["dead-gateway"]

    # The next drain of the queue answers it.
    outcomes = [t.run_next(source, lambda history, item: f"re: {item.text}", sent.append)
                for source in t.pending_inbound()]
    assert [o.session_id for o in outcomes if o] == [session_id] and sent == ["re: hello"]
    assert t.queue(alice("m-1")) == [] and t.status().active_turns == []


def test_status_lists_a_lease_its_holder_left_to_expire_apart_from_running_turns(t, db, clock):
    session_id = t.get_or_create_session(alice("m-1")).session_id
    token = t.turns.acquire_lease(session_id, t.routing_key(alice("m-1")))
    assert [lease.session_id for lease in t.status().active_turns] == [session_id]

    clock.advance(TTL_S)  # nobody renewed it

    status = t.status()
    assert status.active_turns == []
    assert [(lease.session_id, lease.epoch) for lease in status.expired_leases] == [(session_id, token.epoch)]


class HeldClock(ManualClock):
    """A manual clock that, once armed, holds the first store thread that asks it the time until
    told to go on: a caller can then be cancelled in the middle of its store call."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.entered = threading.Event()
        self.go_on = threading.Event()

    def now(self):
        if self.armed and threading.current_thread().name.startswith("turnlog-aio"):
            self.armed = False
            self.entered.set()
            assert self.go_on.wait(WAIT_S)
        return super().now()


def test_a_caller_cancelled_while_its_message_is_accepted_leaves_it_to_the_next_run(db):
    """On an idle key the accept and the turn's start are one store call: a caller that goes away
    before the start is made leaves the accepted message pending, not started with nobody to answer it."""
    clock = HeldClock()
    asked: list[str] = []

    async def agent(history, item):
        asked.append(item.text)
        return "never"

    async def send(text):
        raise AssertionError("nothing is sent")

    with Turnlog(db, clock=clock, owner="gateway-a") as t:
        async def cancelled_call() -> None:
            at = AsyncTurnlog(t, store_threads=1)  # one slot: a later call runs once the held one ended
            clock.armed = True
            call = asyncio.create_task(at.handle_message(alice("m-1"), "hello", agent, send))
            assert await asyncio.to_thread(clock.entered.wait, WAIT_S), "the store call never asked the time"
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            clock.go_on.set()
            await asyncio.wait_for(at.run(lambda: None), WAIT_S)
            await asyncio.wait_for(at.close(), WAIT_S)
        asyncio.run(cancelled_call())

    with Turnlog(db, clock=clock, owner="gateway-b") as t:
        assert asked == []
        assert [item.state for item in t.queue(alice("m-1"))] == ["pending"]
        assert t.status().active_turns == []
        sent: list[str] = []
        outcome = t.run_next(alice("m-1"), lambda history, item: f"re: {item.text}", sent.append)
        assert outcome is not None and sent == ["re: hello"]
