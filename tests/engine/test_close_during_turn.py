"""Closing a Turnlog while one of its turns runs: close waits for the turn as long as it is told,
then cancels it. The cancelled turn gets TurnlogClosed, never a store error, and its lease and
item are released at once, so the key is not wedged until the lease's TTL."""

from __future__ import annotations

import asyncio
import threading

import pytest

from turnlog import ManualClock, SequentialIds, Turnlog, TurnlogClosed
from turnlog.aio import AsyncTurnlog

from chat import alice

WAIT_S = 30.0  # a bound on every wait below, never a pause


def engine(db: str, clock: ManualClock, owner: str) -> Turnlog:
    return Turnlog(db, clock=clock, session_ids=SequentialIds(), owner=owner)


class BlockedTurn:
    """A turn in another thread whose agent blocks until `go` is set."""

    def __init__(self, t: Turnlog) -> None:
        self.entered, self.go = threading.Event(), threading.Event()
        self.sent: list[str] = []
        self.raised: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(t,))
        self.thread.start()
        assert self.entered.wait(WAIT_S), "the agent was never asked"

    def _agent(self, history, item) -> str:
        self.entered.set()
        assert self.go.wait(WAIT_S)
        return f"re: {item.text}"

    def _run(self, t: Turnlog) -> None:
        try:
            t.handle_message(alice("m-1"), "hello", self._agent, self.sent.append)
        except BaseException as e:  # noqa: BLE001 - the test reads it
            self.raised.append(e)

    def finish(self) -> None:
        self.go.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()


def test_close_cancels_a_turn_that_outlasts_its_wait_and_releases_its_lease(db):
    clock = ManualClock()
    t = engine(db, clock, "gateway-a")
    turn = BlockedTurn(t)

    t.close(wait_s=0)
    turn.finish()

    [error] = turn.raised
    assert isinstance(error, TurnlogClosed) and "closed while the turn ran" in str(error)
    assert turn.sent == []
    with engine(db, clock, "gateway-b") as after:
        session_id = after.sessions()[0].session_id
        assert after.turns.holder(session_id) is None  # released now, not at the TTL
        assert after.queue(alice("m-1")) == []  # its item was failed, not left started
        [outcome] = after.handle_message(alice("m-2"), "again", lambda h, item: f"re: {item.text}",
                                         turn.sent.append, timeout=0)
        assert outcome.session_id == session_id and turn.sent == ["re: again"]


def test_close_waits_for_a_running_turn_to_end(db):
    clock = ManualClock()
    t = engine(db, clock, "gateway-a")
    turn = BlockedTurn(t)

    closer = threading.Thread(target=t.close, kwargs={"wait_s": WAIT_S})
    closer.start()
    closer.join(0.5)
    assert closer.is_alive(), "close returned while a turn was running"
    turn.finish()
    closer.join(WAIT_S)

    assert not closer.is_alive() and turn.raised == [] and turn.sent == ["re: hello"]
    with engine(db, clock, "gateway-b") as after:
        assert after.turns.holder(after.sessions()[0].session_id) is None
        assert after.queue(alice("m-1")) == []


def test_close_cancels_an_asyncio_agent_with_a_clear_error(db):
    clock = ManualClock()
    t = engine(db, clock, "gateway-a")
    entered = threading.Event()

    async def agent(history, item):
        entered.set()
        await asyncio.Event().wait()  # never set: only the cancellation ends it

    async def send(text):
        raise AssertionError("nothing is sent")

    async def main() -> BaseException:
        at = AsyncTurnlog(t)
        call = asyncio.create_task(at.handle_message(alice("m-1"), "hello", agent, send))
        assert await asyncio.to_thread(entered.wait, WAIT_S)
        await asyncio.to_thread(t.close, wait_s=0)
        try:
            await asyncio.wait_for(call, WAIT_S)
        except BaseException as e:  # noqa: BLE001 - the test reads it
            return e
        raise AssertionError("the turn was not cancelled")
    error = asyncio.run(main())

    assert isinstance(error, TurnlogClosed), repr(error)
    with engine(db, clock, "gateway-b") as after:
        assert after.turns.holder(after.sessions()[0].session_id) is None
        assert after.queue(alice("m-1")) == []


def test_a_closed_turnlog_says_so_on_every_call_never_a_store_error(tmp_path):
    t = Turnlog(str(tmp_path / "t.db"))
    sid = t.get_or_create_session(alice()).session_id
    key = t.routing_key(alice())
    t.close()
    assert t.routing_key(alice()) == key  # the key rule needs no store: it still answers
    calls = {
        "sessions": lambda: t.sessions(),
        "session": lambda: t.session(sid),
        "transcript": lambda: t.transcript(sid),
        "get_or_create_session": lambda: t.get_or_create_session(alice()),
        "handle_message": lambda: t.handle_message(alice("late"), "late", lambda h, i: "r", lambda s: None),
        "search": lambda: t.search("late"),
        "ledger": lambda: t.ledger(),
        "history": lambda: t.history(sid),
    }
    for name, call in calls.items():
        try:
            call()
        except TurnlogClosed as e:
            assert "closed" in str(e), name
        else:
            raise AssertionError(f"{name} answered after close")
    t.close()  # a second close is no error
    assert t.read_only is False  # what it was opened as still reads


def test_a_closed_turnlogs_groups_say_so_on_every_public_method(tmp_path):
    """`t.turns` and `t.maintenance` (and a reference to them kept from before the close) refuse
    each of their public methods with TurnlogClosed, never the store's own error."""
    t = Turnlog(str(tmp_path / "t.db"))
    sid = t.get_or_create_session(alice()).session_id
    turns, maintenance = t.turns, t.maintenance
    t.close()
    groups = {"turns": (turns, {"holder": (sid,), "transcript": (sid,), "agent_history": (sid,),
                                "acquire_lease": (sid, "k")}),
              "maintenance": (maintenance, {"catch_up": (), "projection_status": (), "log_head": (),
                                            "verify": (), "seal": (), "projections_behind": ()})}
    for group_name, (group, calls) in groups.items():
        for name, args in calls.items():
            with pytest.raises(TurnlogClosed, match=f"closed: {group_name}.{name} needs an open one"):
                getattr(group, name)(*args)
        assert group is getattr(t, group_name)
    assert t.stale is False  # a property read from memory still answers
