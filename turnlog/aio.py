"""The asyncio face of turnlog: `await handle_message(source, text, agent, send)`.

`agent(history, item)` and `send(text)` are coroutine functions (an agent may also be an async
generator of rich reply messages, domain/reply.py). The event loop never waits for the store:
every piece of store work runs in a worker thread, and at most `store_threads` of them do store
work at once (a thread waiting for the agent or the platform gives its slot back), so the loop
stays responsive however many turns are running. Keys run concurrently; one key's messages are
accepted in arrival order and its turns run one at a time, oldest first (the sync engine's rule:
the inbox is FIFO and the lease admits one turn). A turn holds no thread while its agent is
awaited; its reply is written, sent (the send awaited on the loop) and settled in a worker
thread, and an async-generator agent's messages are pulled from that thread. The lease keeper
cancels a turn whose lease was lost: its agent task gets CancelledError and handle_message raises
TurnCancelled.

    at = AsyncTurnlog(Turnlog("gateway.db"))
    await at.start_gateway("main")
    await at.handle_message(source, "hello", agent, send)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
import functools
from dataclasses import dataclass, field
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Sequence, TypeVar

from .api import CLOSE_WAIT_S, Turnlog
from .commands.awaiting import on_loop
from .commands.compaction import Compaction
from .commands.context import giving_back
from .commands.delivery import takes_idempotency_key
from .commands.lease import LeaseToken
from .commands.slash import CommandResult
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
        self._slots = threading.BoundedSemaphore(store_threads)
        # A thread waiting for a send or an async generator's next message gives its slot back.
        self._threads = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="turnlog-aio")
        # Started now, not on the loop: starting a thread waits for it, which would stall the loop.
        ready = threading.Barrier(threads + 1)
        for _ in range(threads):
            self._threads.submit(ready.wait)
        ready.wait()
        self._accepting: dict[str, asyncio.Lock] = {}
        self._running: dict[str, asyncio.Lock] = {}

    # -- running store work off the loop ---------------------------------------------------

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call a sync Turnlog method in a worker thread that holds a store slot."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, functools.partial(self._slotted, fn, *args, **kwargs))

    def _slotted(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        # A save waiting for its group commit gives the slot back, so that the group can grow.
        with self._slots, giving_back(self._slots.release, self._slots.acquire):
            return fn(*args, **kwargs)

    def _wait(self, future: Any) -> Any:
        """In a worker thread: wait for a coroutine on the loop, without holding a store slot."""
        self._slots.release()
        try:
            return future.result()
        finally:
            self._slots.acquire()

    def _bridge(self, loop: asyncio.AbstractEventLoop, agent: AsyncAgent, send: AsyncSend
                ) -> tuple[Callable[[Sequence[Any], InboxItem], Any], Callable[..., None]]:
        def responder(history: Sequence[Any], item: InboxItem) -> Any:
            messages = list(history)  # read here, in the worker thread, not on the loop
            running = current_turn()

            async def start() -> Any:
                reply = agent(messages, item)
                return await reply if inspect.isawaitable(reply) else reply
            future = asyncio.run_coroutine_threadsafe(start(), loop)
            if running is not None:
                running.cancel.on_cancel(lambda _reason: future.cancel())
            reply = self._wait(future)
            if inspect.isasyncgen(reply) or hasattr(reply, "__anext__"):
                return self._pull(loop, reply)
            return reply

        def sender(text: str) -> None:
            self._wait(asyncio.run_coroutine_threadsafe(_awaited(send(text)), loop))

        def keyed_sender(text: str, idempotency_key: str) -> None:
            self._wait(asyncio.run_coroutine_threadsafe(_awaited(send(text, idempotency_key=idempotency_key)), loop))
        return responder, keyed_sender if takes_idempotency_key(send) else sender

    def _pull(self, loop: asyncio.AbstractEventLoop, stream: AsyncIterator[Any]) -> Iterator[Any]:
        """An async generator's messages, one at a time, for the writer in the worker thread."""
        running = current_turn()
        while True:
            future = asyncio.run_coroutine_threadsafe(_next(stream), loop)
            if running is not None:
                running.cancel.on_cancel(functools.partial(_cancel_pull, future))
            done, value = self._wait(future)
            if done:
                return
            yield value

    # -- the gateway loop ------------------------------------------------------------------

    async def handle_message(self, source: SessionSource, text: str, agent: AsyncAgent, send: AsyncSend, *,
                             kind: str = HUMAN, timeout: float | None = None) -> list[TurnOutcome]:
        """Accept the message durably, then run the key's turns until its queue is empty."""
        key = self.turnlog.routing_key(source)
        async with self._accepting.setdefault(key, asyncio.Lock()):  # FIFO: arrival order
            await self.run(self.turnlog.accept, source, text, kind=kind)
        return await self._run_key(key, source, agent, send, timeout)

    async def run_pending(self, source: SessionSource, agent: AsyncAgent, send: AsyncSend, *,
                          timeout: float | None = None) -> list[TurnOutcome]:
        """Run the source's key's waiting turns until its queue is empty: the second half of
        handle_message, for a webhook or bot handler that accepted (and acknowledged) first."""
        return await self._run_key(self.turnlog.routing_key(source), source, agent, send, timeout)

    async def _run_key(self, key: str, source: SessionSource, agent: AsyncAgent, send: AsyncSend,
                       timeout: float | None) -> list[TurnOutcome]:
        async with self._running.setdefault(key, asyncio.Lock()):
            return await self._run_turns(source, agent, send, timeout)

    async def _run_turns(self, source: SessionSource, agent: AsyncAgent, send: AsyncSend,
                         timeout: float | None) -> list[TurnOutcome]:
        outcomes = []
        while (outcome := await self._run_one(source, agent, send, timeout)) is not None:
            outcomes.append(outcome)
        return outcomes

    async def _run_one(self, source: SessionSource, agent: AsyncAgent, send: AsyncSend,
                       timeout: float | None) -> TurnOutcome | None:
        """One turn: its start in a worker thread, the agent on the loop (no thread held while it
        thinks), then its reply written, sent and settled in a worker thread."""
        loop = asyncio.get_running_loop()
        handoff = _Handoff()
        try:
            turn = await self.run(self._begin, source, timeout, handoff)
        except asyncio.CancelledError:
            orphan = handoff.abandon()
            if orphan is not None:  # begun just as the caller went away: nobody will run it
                self._threads.submit(self._slotted, orphan.fail, TurnCancelled(CALLER_CANCELLED))
            raise
        if turn is None:
            return None
        running = turn.keep()
        try:
            history = await self.run(self.turnlog.turns.agent_history, turn.token.session_id)
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
        _, sender = self._bridge(loop, agent, send)
        return await self.run(turn.respond, responder, sender)

    def _begin(self, source: SessionSource, timeout: float | None, handoff: "_Handoff") -> Turn | None:
        """In a worker thread: begin the key's next turn for a caller that may be cancelled meanwhile."""
        turn = self.turnlog.turns.begin_next(source, timeout=timeout, stop=handoff.stop)
        if turn is not None and not handoff.deliver(turn):
            turn.fail(TurnCancelled(CALLER_CANCELLED))
            return None
        return turn

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
            return self._wait(asyncio.run_coroutine_threadsafe(_awaited(awaitable), loop))

        def call(*args: Any, **kwargs: Any) -> T:
            with on_loop(awaiter):
                return fn(*args, **kwargs)
        return call

    async def start_gateway(self, name: str = "main") -> Any:
        return await self.run(self.turnlog.start_gateway, name)

    async def sweep_deliveries(self, send: AsyncSweepSend, **options: Any) -> Any:
        loop = asyncio.get_running_loop()

        def sweep_send(target: dict[str, Any], text: str) -> None:
            self._wait(asyncio.run_coroutine_threadsafe(_awaited(send(target, text)), loop))
        reconcile = options.get("reconcile")
        if reconcile is not None:
            def bridged(target: dict[str, Any], attempt: Any) -> Any:
                return self._wait(asyncio.run_coroutine_threadsafe(_awaited(reconcile(target, attempt)), loop))
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
        """Turnlog.close: running turns are waited for up to `wait_s` s, then cancelled."""
        await self.run(self.turnlog.close, wait_s)
        self.shutdown_threads()

    def shutdown_threads(self) -> None:
        """End the worker threads (Turnlog.close calls this for the one `wrap` keeps on it)."""
        self._threads.shutdown(wait=False)


async def _awaited(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


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
    wrapped = getattr(turnlog, "_aio", None)
    if wrapped is None:
        wrapped = turnlog._aio = AsyncTurnlog(turnlog)  # type: ignore[attr-defined]
    return wrapped


@dataclass
class _Handoff:
    """A turn begun in a worker thread for a caller on the loop that may be cancelled meanwhile.
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

    def abandon(self) -> Turn | None:
        with self._lock:
            self.stop.set()
            turn, self._turn = self._turn, None
            return turn


def _cancel_pull(pull: "concurrent.futures.Future[Any]", _reason: str) -> None:
    """The turn was cancelled: stop waiting for the agent's next message."""
    pull.cancel()
