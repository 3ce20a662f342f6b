"""The asyncio face of turnlog: `await handle_message(source, text, agent, send)`.

`agent(history, item)` and `send(text)` are coroutine functions (an agent may also be an async
generator of rich reply messages, domain/reply.py). The event loop never waits for the store:
every piece of store work runs in a store thread (commands/store_threads.py), and at most
`store_threads` of them do store work at once (a thread waiting for the agent or the platform
gives its slot back), so the loop stays responsive however many turns are running. Keys run
concurrently; one key's messages are accepted in arrival order and its turns run one at a time,
oldest first (the sync engine's rule: the inbox is FIFO and the lease admits one turn). A turn is
two store calls: on a key idle in this process, the accept, the turn's start (one transaction, as
the sync handle_message) and the agent's history read; then, after the agent ran on the loop (no
thread held while it thinks), its reply written with its attempting delivery, sent (the send
awaited on the loop), settled, and the key's next turn begun if one waits. An async-generator
agent's messages are pulled from that thread. The lease keeper
cancels a turn whose lease was lost: its agent task gets CancelledError and handle_message raises
TurnCancelled.

    at = AsyncTurnlog(Turnlog("gateway.db"))
    await at.start_gateway("main")
    await at.handle_message(source, "hello", agent, send)
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import functools
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Sequence, TypeVar

from .api import CLOSE_WAIT_S, Turnlog
from .closing import is_closed, refuse_after_close, require_open, tie
from .commands.awaiting import on_loop
from .commands.compaction import Compaction
from .commands.delivery import takes_idempotency_key
from .commands.lease import LeaseToken
from .commands.slash import CommandResult
from .commands.store_threads import Handoffs, LoopCall, StoreThreads, engine_time
from .commands.turn import Turn, TurnOutcome
from .commands.keeper import current_turn
from .domain.inbox import HUMAN, InboxItem
from .domain.source import SessionSource
from .errors import TurnCancelled

T = TypeVar("T")
AsyncAgent = Callable[[Sequence[Any], InboxItem], Any]  # a coroutine function or an async generator function
AsyncSend = Callable[..., Awaitable[Any]]  # send(text), or send(text, idempotency_key=...)
AsyncSweepSend = Callable[[dict[str, Any], str], Awaitable[Any]]

DEFAULT_STORE_THREADS = 2
DEFAULT_THREADS = 16
CALLER_CANCELLED = "the caller of handle_message was cancelled before its turn ran"


class AsyncTurnlog:
    def __init__(self, turnlog: Turnlog, *, store_threads: int = DEFAULT_STORE_THREADS,
                 threads: int = DEFAULT_THREADS) -> None:
        self.turnlog = turnlog
        tie(self, turnlog)  # closed with its Turnlog: its calls then raise TurnlogClosed
        # A thread waiting for a send or an async generator's next message gives its slot back.
        self._store = StoreThreads(store_threads, threads)
        self._keys: dict[str, _Key] = {}

    @property
    def handoffs(self) -> Handoffs:
        """The calls made so far between the loop and the store threads (`store_calls`, `loop_calls`):
        a turn through handle_message on an idle key costs two store calls and one loop call (its send)."""
        return self._store.handoffs

    # -- running store work off the loop ---------------------------------------------------

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call a sync Turnlog method in a store thread."""
        return await self._store.call(functools.partial(fn, *args, **kwargs))

    def _wait(self, loop: asyncio.AbstractEventLoop, awaitable: Any) -> Any:
        """In a store thread: await `awaitable` on the loop, without holding a store slot."""
        return self._store.wait(self._store.on_loop(loop, awaitable))

    def _bridge(self, loop: asyncio.AbstractEventLoop, agent: AsyncAgent, send: AsyncSend
                ) -> tuple[Callable[[Sequence[Any], InboxItem], Any], Callable[..., None]]:
        def responder(history: Sequence[Any], item: InboxItem) -> Any:
            messages = list(history)  # read here, in the store thread, not on the loop
            running = current_turn()

            async def start() -> Any:
                reply = agent(messages, item)
                return await reply if inspect.isawaitable(reply) else reply
            call = self._store.on_loop(loop, start())
            if running is not None:
                running.cancel.on_cancel(lambda _reason: call.cancel())
            reply = self._store.wait(call)
            if inspect.isasyncgen(reply) or hasattr(reply, "__anext__"):
                return self._pull(loop, reply)
            return reply
        return responder, self._sender(loop, send)

    def _sender(self, loop: asyncio.AbstractEventLoop, send: AsyncSend) -> Callable[..., None]:
        def sender(text: str) -> None:
            self._wait(loop, send(text))

        def keyed_sender(text: str, idempotency_key: str) -> None:
            self._wait(loop, send(text, idempotency_key=idempotency_key))
        return keyed_sender if takes_idempotency_key(send) else sender

    def _pull(self, loop: asyncio.AbstractEventLoop, stream: AsyncIterator[Any]) -> Iterator[Any]:
        """An async generator's messages, one at a time, for the writer in the store thread."""
        running = current_turn()
        while True:
            call = self._store.on_loop(loop, _next(stream))
            if running is not None:
                running.cancel.on_cancel(functools.partial(_cancel_pull, call))
            done, value = self._store.wait(call)
            if done:
                return
            yield value

    # -- the gateway loop ------------------------------------------------------------------

    async def handle_message(self, source: SessionSource, text: str, agent: AsyncAgent, send: AsyncSend, *,
                             kind: str = HUMAN, timeout: float | None = None) -> list[TurnOutcome]:
        """Accept the message durably, then run the key's turns until its queue is empty. On a key
        idle in this process, the accept and the turn's start are one store call and one transaction."""
        key = self._key(self.turnlog.routing_key(source))
        async with key.accepting:  # FIFO: arrival order
            if key.callers:  # its turns run here now: they will run this message too
                await self.run(self.turnlog.accept, source, text, kind=kind)
                idle = False
            else:
                idle, handoff = True, _Handoff()
                key.callers += 1
                await key.running.acquire()  # free, nobody waiting for it: taken at once
                try:
                    first = await self._begun(handoff, self._accept_and_start, source, text, kind)
                except BaseException:
                    key.running.release()
                    key.callers -= 1
                    raise
        if not idle:
            return await self._run_key(key, source, agent, send, timeout)
        try:
            return await self._run_turns(source, agent, send, timeout, handoff, first)
        finally:
            key.running.release()
            key.callers -= 1

    async def run_pending(self, source: SessionSource, agent: AsyncAgent, send: AsyncSend, *,
                          timeout: float | None = None) -> list[TurnOutcome]:
        """Run the source's key's waiting turns until its queue is empty: the second half of
        handle_message, for a webhook or bot handler that accepted (and acknowledged) first."""
        return await self._run_key(self._key(self.turnlog.routing_key(source)), source, agent, send, timeout)

    def _key(self, key: str) -> "_Key":
        found = self._keys.get(key)
        if found is None:
            found = self._keys[key] = _Key()
        return found

    async def _run_key(self, key: "_Key", source: SessionSource, agent: AsyncAgent, send: AsyncSend,
                       timeout: float | None) -> list[TurnOutcome]:
        key.callers += 1
        try:
            async with key.running:
                return await self._run_turns(source, agent, send, timeout, _Handoff(), None)
        finally:
            key.callers -= 1

    async def _run_turns(self, source: SessionSource, agent: AsyncAgent, send: AsyncSend, timeout: float | None,
                         handoff: "_Handoff", begun: "_Begun | None") -> list[TurnOutcome]:
        """The key's turns, the first begun already (or begun now): each answered in one store call
        that also begins the next, if one waits."""
        if begun is None:
            begun = await self._begun(handoff, self._begin, source, timeout, False)
        outcomes = []
        while begun is not None:
            outcome, begun = await self._answer(source, agent, send, timeout, handoff, *begun)
            outcomes.append(outcome)
        return outcomes

    async def _answer(self, source: SessionSource, agent: AsyncAgent, send: AsyncSend, timeout: float | None,
                      handoff: "_Handoff", turn: Turn, history: list[Any]) -> tuple[TurnOutcome, "_Begun | None"]:
        """One turn: the agent on the loop (no thread held while it thinks), then in a store
        thread its reply written, sent (the send awaited on the loop) and settled, and the
        key's next turn begun."""
        loop = asyncio.get_running_loop()
        running = turn.keep()
        try:
            reply = agent(history, turn.item)
            if inspect.isawaitable(reply):
                task = asyncio.ensure_future(reply)
                if running is not None:
                    running.cancel.on_cancel(lambda _reason: loop.call_soon_threadsafe(task.cancel))
                reply = await task
        except BaseException as failure:
            raise await self.run(turn.fail, failure) from failure
        if inspect.isasyncgen(reply) or hasattr(reply, "__anext__"):
            stream = reply
            responder = lambda history, item: self._pull(loop, stream)  # noqa: E731
        else:
            responder = lambda history, item: reply  # noqa: E731
        return await self._begun(handoff, self._respond, turn, responder, self._sender(loop, send), source, timeout)

    async def _begun(self, handoff: "_Handoff", step: Callable[..., T], *args: Any) -> T:
        """A store call that may begin a turn, for a caller that may be cancelled meanwhile (one
        handoff serves all the calls of one caller, one at a time)."""
        try:
            begun = await self._store.call(functools.partial(step, *args, handoff))
            handoff.received()
            return begun
        except asyncio.CancelledError:
            orphan = handoff.abandon()
            if orphan is not None:  # begun just as the caller went away: nobody will run it
                self._store.submit(functools.partial(orphan.fail, TurnCancelled(CALLER_CANCELLED)))
            raise

    # -- in a store thread -------------------------------------------------------------------

    def _accept_and_start(self, source: SessionSource, text: str, kind: str, handoff: "_Handoff") -> "_Begun | None":
        return self._deliver(self.turnlog.turns.accept_and_start(source, text, kind=kind, stop=handoff.stop),
                             handoff)

    def _begin(self, source: SessionSource, timeout: float | None, cached: bool, handoff: "_Handoff") -> "_Begun | None":
        return self._deliver(self.turnlog.turns.begin_next(source, timeout=timeout, stop=handoff.stop, cached=cached),
                             handoff)

    def _respond(self, turn: Turn, responder: Callable[[Sequence[Any], InboxItem], Any], sender: Callable[..., None],
                 source: SessionSource, timeout: float | None, handoff: "_Handoff") -> tuple[TurnOutcome, "_Begun | None"]:
        outcome = turn.respond(responder, sender)
        # The queue as this process last wrote it: what another process accepts meanwhile is its own to run.
        return outcome, self._begin(source, timeout, True, handoff)

    def _deliver(self, turn: Turn | None, handoff: "_Handoff") -> "_Begun | None":
        """A turn just begun, with its agent's history read here, for a caller that may be gone."""
        if turn is None:
            return None
        try:
            history = self.turnlog.turns.agent_history(turn.token.session_id)
        except BaseException as failure:
            raise turn.fail(failure) from failure
        if not handoff.deliver(turn):
            turn.fail(TurnCancelled(CALLER_CANCELLED))
            return None
        return turn, history

    async def command(self, source: SessionSource, text: str) -> CommandResult:
        """Turnlog.command; an async summariser (/compress) is awaited on this loop."""
        return await self.run(self._awaiting_here(asyncio.get_running_loop(), self.turnlog.command), source, text)

    async def compact(self, key_or_session: Any, **options: Any) -> Compaction:
        """Turnlog.compact; an async summariser is awaited on this loop."""
        return await self.run(self._awaiting_here(asyncio.get_running_loop(), self.turnlog.compact),
                              key_or_session, **options)

    async def compress(self, token: LeaseToken, source: SessionSource, **options: Any) -> LeaseToken:
        """Turnlog.turns.compress (pre-turn hygiene); an async summariser is awaited on this loop."""
        return await self.run(self._awaiting_here(asyncio.get_running_loop(), self.turnlog.turns.compress),
                              token, source, **options)

    def _awaiting_here(self, loop: asyncio.AbstractEventLoop, fn: Callable[..., T]) -> Callable[..., T]:
        """`fn` for a worker thread, with a gateway callback's coroutine awaited on `loop`."""
        def awaiter(awaitable: Awaitable[Any]) -> Any:
            return self._wait(loop, awaitable)

        def call(*args: Any, **kwargs: Any) -> T:
            with on_loop(awaiter):
                return fn(*args, **kwargs)
        return call

    async def start_gateway(self, name: str = "main") -> Any:
        return await self.run(self.turnlog.start_gateway, name)

    async def sweep_deliveries(self, send: AsyncSweepSend, **options: Any) -> Any:
        loop = asyncio.get_running_loop()

        def sweep_send(target: dict[str, Any], text: str) -> None:
            self._wait(loop, send(target, text))
        reconcile = options.get("reconcile")
        if reconcile is not None:
            def bridged(target: dict[str, Any], attempt: Any) -> Any:
                return self._wait(loop, reconcile(target, attempt))
            options["reconcile"] = bridged
        return await self.run(self.turnlog.sweep_deliveries, sweep_send, **options)

    async def resume_interrupted(self, agent: AsyncAgent, send: AsyncSend, **options: Any) -> list[TurnOutcome]:
        responder, sender = self._bridge(asyncio.get_running_loop(), agent, send)
        return await self.run(self.turnlog.resume_interrupted, responder, sender, **options)

    async def drain(self, reason: str = "restart", timeout_s: float = 0.0) -> bool:
        return await self.run(self.turnlog.drain, reason, timeout_s)

    async def stop_gateway(self) -> None:
        await self.run(self.turnlog.stop_gateway)

    async def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Turnlog.close: running turns are waited for up to `wait_s` s, then cancelled. Closing
        it again is no error."""
        if not is_closed(self):
            await self.run(self.turnlog.close, wait_s)
        self.shutdown_threads()

    def shutdown_threads(self) -> None:
        """End the store threads once their queued calls are done (Turnlog.close calls this for
        the one `wrap` keeps on it)."""
        self._store.shutdown()


async def _next(stream: AsyncIterator[Any]) -> tuple[bool, Any]:
    try:
        return False, await stream.__anext__()
    except StopAsyncIteration:
        return True, None


async def handle_message(turnlog: "Turnlog | AsyncTurnlog", source: SessionSource, text: str, agent: AsyncAgent,
                         send: AsyncSend, **options: Any) -> list[TurnOutcome]:
    """`await turnlog.aio.handle_message(t, source, text, agent, send)`: one message, one AsyncTurnlog
    per Turnlog (made on first use and kept on it)."""
    return await wrap(turnlog).handle_message(source, text, agent, send, **options)


def wrap(turnlog: "Turnlog | AsyncTurnlog") -> AsyncTurnlog:
    if isinstance(turnlog, AsyncTurnlog):
        return turnlog
    require_open(turnlog, "turnlog.aio")  # no store threads started for a Turnlog that is gone
    wrapped = getattr(turnlog, "_aio", None)
    if wrapped is None:
        wrapped = turnlog._aio = AsyncTurnlog(turnlog)  # type: ignore[attr-defined]
    return wrapped


@dataclass
class _Handoff:
    """A turn begun in a store thread for a caller on the loop that may be cancelled meanwhile.
    Whichever side comes second settles it: the thread fails a turn it began for a caller already
    gone, the cancelled caller fails one that was delivered but never run. Before the turn begins,
    `stop` keeps it from beginning at all, so the accepted message stays pending for the next run."""

    stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _turn: Turn | None = None

    def deliver(self, turn: Turn) -> bool:
        with self._lock:
            if self.stop.is_set():
                return False
            self._turn = turn
            return True

    def received(self) -> None:
        """The caller has the delivered turn: it is the caller's to answer or fail from now on."""
        with self._lock:
            self._turn = None

    def abandon(self) -> Turn | None:
        with self._lock:
            self.stop.set()
            turn, self._turn = self._turn, None
            return turn


@dataclass
class _Key:
    """A routing key's turns in this process: its arrivals accepted one at a time, in order, and
    its turns run by one caller at a time; `callers` counts those running or waiting to."""

    accepting: asyncio.Lock = field(default_factory=asyncio.Lock)
    running: asyncio.Lock = field(default_factory=asyncio.Lock)
    callers: int = 0


def _cancel_pull(pull: LoopCall, _reason: str) -> None:
    """The turn was cancelled: stop waiting for the agent's next message."""
    pull.cancel()


_Begun = tuple[Turn, list[Any]]  # a turn begun in a store thread, with its agent's history

refuse_after_close(AsyncTurnlog, "AsyncTurnlog", still_open={"close", "shutdown_threads", "handoffs"})
