"""Closing a Turnlog while one of its turns runs: close waits for the turn as long as it is told,
then cancels it. The cancelled turn gets TurnlogClosed, never a store error, and its lease and
item are released at once, so the key is not wedged until the lease's TTL."""

from __future__ import annotations

import asyncio
import inspect
import threading

import pytest

import turnlog.aio
from turnlog import AsOf, ManualClock, SequentialIds, Turnlog, TurnlogClosed
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


def _arguments(member, given: dict) -> list:
    """The required positional arguments of `member`, by name from `given` (a new parameter name
    fails here: name it in `given`, so that the call below reaches the method)."""
    return [given[p.name] for p in list(inspect.signature(member).parameters.values())[1:]
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _public(cls, answering: set[str]) -> dict:
    """Every public method and property of `cls` (inherited ones too) but those that need no store."""
    return {name: member for name, member in inspect.getmembers(cls)
            if not name.startswith("_") and name not in answering
            and (inspect.isfunction(member) or isinstance(member, property))}


def test_a_moment_of_a_closed_turnlog_says_so_on_every_public_method(tmp_path):
    """`t.at(...)` kept from before the close refuses each of its public reads (and its `at`
    time) with TurnlogClosed, never the store's own error."""
    t = Turnlog(str(tmp_path / "t.db"))
    sid = t.get_or_create_session(alice()).session_id
    key = t.routing_key(alice())
    moment = t.at("#1")
    t.close()
    given = {"session_id": sid, "stream": sid, "key": key, "name": "routes"}
    members = _public(AsOf, set())
    assert {"routes", "session", "transcript", "view", "at"} <= set(members)
    for name, member in members.items():
        with pytest.raises(TurnlogClosed, match=f"closed: AsOf.{name} needs an open one"):
            if isinstance(member, property):
                getattr(moment, name)
            else:
                getattr(moment, name)(*_arguments(member, given))
    assert moment.position == 1  # what it is kept as still reads


async def _agent(history, item) -> str:
    return "r"


async def _send(text: str) -> None:
    return None


@pytest.mark.parametrize("made", ["wrap", "AsyncTurnlog"])
def test_the_asyncio_face_of_a_closed_turnlog_says_so_on_every_public_method(tmp_path, made):
    """Closed through the Turnlog (whose `wrap`ped face ends its threads with it) or through the
    face itself, each of its calls raises TurnlogClosed, not the shut-down thread pool's error."""
    t = Turnlog(str(tmp_path / "t.db"))
    sid = t.get_or_create_session(alice()).session_id
    face = turnlog.aio.wrap(t) if made == "wrap" else AsyncTurnlog(t)
    given = {"source": alice("late"), "text": "late", "agent": _agent, "send": _send, "fn": t.sessions,
             "key_or_session": sid, "token": None}
    members = _public(AsyncTurnlog, {"close", "shutdown_threads", "handoffs"})
    assert {"handle_message", "run", "command", "start_gateway"} <= set(members)

    async def main() -> None:
        if made == "wrap":
            t.close()
        else:
            await face.close()
        for name, member in members.items():
            with pytest.raises(TurnlogClosed, match=f"closed: AsyncTurnlog.{name} needs an open one"):
                await getattr(face, name)(*_arguments(member, given))
        await face.close()  # a second close is no error
        with pytest.raises(TurnlogClosed, match="closed"):
            await turnlog.aio.handle_message(t, alice("later"), "later", _agent, _send)
    asyncio.run(main())


def test_a_scrape_of_a_closed_turnlogs_metrics_says_so(tmp_path):
    """The registry of `metrics()` outlives the Turnlog in a gateway's exporter: a scrape after
    the close is TurnlogClosed, not the store's error."""
    from prometheus_client import generate_latest

    t = Turnlog(str(tmp_path / "t.db"))
    t.get_or_create_session(alice())
    registry = t.metrics()
    assert b"turnlog_deliveries" in generate_latest(registry)
    t.close()
    with pytest.raises(TurnlogClosed, match="closed: a scrape of metrics"):
        generate_latest(registry)


def test_a_turn_begun_before_the_close_and_answered_after_it_says_so(tmp_path):
    """A caller that runs its agent itself (`t.turns.begin_next`) and answers after the close gets
    TurnlogClosed, and the turn's item was failed by the close, as one running would be."""
    db = str(tmp_path / "t.db")
    t = Turnlog(db)
    t.accept(alice("m-1"), "hello")
    turn = t.turns.begin_next(alice())
    t.close(0)
    with pytest.raises(TurnlogClosed, match="closed while the turn ran"):
        turn.respond(lambda history, item: "late", lambda text: None)
    with Turnlog(db) as again:
        assert [(f.state, f.outcome) for f in again.message_fates(alice())] == [("completed", "failed")]


def test_a_turn_left_unanswered_by_a_close_is_no_longer_counted_as_running(tmp_path):
    """The process's "a turn is running" (which holds its full collections back) forgets the
    turns of a closed engine: one begun and never answered would hold them back for good."""
    from turnlog.gc_turns import in_turn

    t = Turnlog(str(tmp_path / "t.db"))
    t.accept(alice("m-1"), "hello")
    turn = t.turns.begin_next(alice())
    assert in_turn()
    t.close(0)
    assert not in_turn()
    with pytest.raises(TurnlogClosed):
        turn.respond(lambda history, item: "late", lambda text: None)
    assert not in_turn()
