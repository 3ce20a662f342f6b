"""The threads that do the asyncio API's store work, and its calls between them and the event loop.

A call from the loop is queued; a free thread takes it when one of the `slots` is free (at most
that many threads do store work at once). A thread that finishes a call takes the next queued one
without sleeping, and its results reach the loop in batches: one loop wake-up (a
call_soon_threadsafe) for every result posted before the loop got to them, not one a result. A
thread waiting inside a call (for a coroutine on the loop, or for its group commit) gives its slot
back meanwhile and takes one again after, before any queued call. One lock guards the queue and
the slots; each thread sleeps on a lock of its own, released by whoever hands it work: no
Condition, no semaphore, no executor future per call.

`handoffs` counts the calls each way, so that the round trips a turn costs can be read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
import time
import weakref
from collections import deque
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar

from .context import giving_back

T = TypeVar("T")


@dataclass(frozen=True)
class Handoffs:
    """Calls between the event loop and the store threads since the start: `store_calls` made
    from the loop into a store thread, `loop_calls` a store thread made to the loop and waited for
    (a send, an agent's next message, an async summariser)."""

    store_calls: int
    loop_calls: int


# The caller's engine-time total (a one-item list), if it measures one (engine_time).
_meter: ContextVar[list[float] | None] = ContextVar("turnlog_engine_meter", default=None)
_running = threading.local()  # the call a store thread runs now (its `call`)


@contextmanager
def engine_time() -> Iterator[list[float]]:
    """On the loop, around one caller's awaits: `[seconds]` its store calls ran in the store
    threads, not counting the time they queued for a thread or waited for the loop (the agent,
    the send). A group commit's wait is counted: it is the engine's commit. This is the engine's
    own time per turn, which a caller's wall time hides behind the other keys' turns when many
    are in flight."""
    spent = [0.0]
    token = _meter.set(spent)
    try:
        yield spent
    finally:
        _meter.reset(token)


class _Worker:
    __slots__ = ("wake", "call", "ended")

    def __init__(self) -> None:
        self.wake = threading.Lock()
        self.wake.acquire()  # released by whoever hands this thread a call (or tells it to stop)
        self.call: _Call | None = None
        self.ended = False


class _Call:
    __slots__ = ("fn", "future", "channel", "meter", "waited")

    def __init__(self, fn: Callable[[], Any], future: "asyncio.Future[Any] | None", channel: "_Channel | None") -> None:
        self.fn = fn
        self.future = future
        self.channel = channel
        self.meter = _meter.get()
        self.waited = 0.0  # seconds spent in StoreThreads.wait (for the loop) while it ran

    def run(self) -> None:
        future, channel = self.future, self.channel
        if future is not None and future.cancelled():  # its caller went away before it started
            return
        began = time.perf_counter()
        _running.call = self
        try:
            value, failed = self.fn(), False
        except BaseException as error:  # raised in the caller, on the loop
            value, failed = error, True
        finally:
            _running.call = None
            if self.meter is not None:
                self.meter[0] += time.perf_counter() - began - self.waited
        if future is not None and channel is not None:
            channel.post(lambda: _settle(future, value, failed))


def _settle(future: "asyncio.Future[Any]", value: Any, failed: bool) -> None:
    if future.done():  # cancelled meanwhile
        return
    if failed:
        future.set_exception(value)
    else:
        future.set_result(value)


class _Channel:
    """What store threads hand one event loop: callbacks run there in batches, one wake-up a batch."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._lock = threading.Lock()
        self._items: list[Callable[[], Any]] = []
        self._scheduled = False

    def post(self, item: Callable[[], Any]) -> None:
        with self._lock:
            self._items.append(item)
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed: nobody awaits the result any more
            pass

    def _drain(self) -> None:
        with self._lock:
            items, self._items = self._items, []
            self._scheduled = False
        for item in items:
            item()


class LoopCall:
    """An awaitable run on the loop for a store thread, which waits for its outcome."""

    def __init__(self, channel: _Channel, awaitable: Any) -> None:
        self._channel = channel
        self._done = threading.Lock()
        self._done.acquire()
        self._task: asyncio.Future[Any] | None = None
        self._cancelled = False
        self._value: Any = None
        self._error: BaseException | None = None
        channel.post(lambda: self._start(awaitable))

    def _start(self, awaitable: Any) -> None:
        if self._cancelled:
            self._finish(None, concurrent.futures.CancelledError())
            return
        try:
            self._task = asyncio.ensure_future(_awaited(awaitable))
        except BaseException as error:
            self._finish(None, error)
            return
        self._task.add_done_callback(self._ended)

    def _ended(self, task: "asyncio.Future[Any]") -> None:
        if task.cancelled():
            self._finish(None, concurrent.futures.CancelledError())
        else:
            error = task.exception()
            self._finish(None if error is not None else task.result(), error)

    def _finish(self, value: Any, error: BaseException | None) -> None:
        self._value, self._error = value, error
        self._done.release()

    def cancel(self) -> None:
        """From any thread: cancel the awaitable's task (or keep it from starting)."""
        self._cancelled = True
        self._channel.post(lambda: self._task.cancel() if self._task is not None else None)

    def result(self) -> Any:
        """In the store thread: wait for the outcome (the caller gives its slot back meanwhile)."""
        self._done.acquire()
        if self._error is not None:
            raise self._error
        return self._value


async def _awaited(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class StoreThreads:
    def __init__(self, slots: int, threads: int, *, name: str = "turnlog-aio") -> None:
        if slots < 1 or threads < 1:
            raise ValueError("the store threads need at least one slot and one thread")
        slots = min(slots, threads)  # a slot no thread can take would never be used
        self._lock = threading.Lock()
        self._queue: deque[_Call] = deque()
        self._idle: list[_Worker] = []
        self._wanting_slot: deque[threading.Lock] = deque()  # threads inside a call, waiting to take a slot back
        self._free = slots
        self._closed = False
        self._channels: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Channel] = weakref.WeakKeyDictionary()
        self._store_calls = 0
        self._loop_calls = 0
        # Started now, not on the loop: starting a thread waits for it, which would stall the loop.
        ready = threading.Barrier(threads + 1)
        for n in range(threads):
            threading.Thread(target=self._work, args=(ready,), name=f"{name}-{n}", daemon=True).start()
        ready.wait()

    @property
    def handoffs(self) -> Handoffs:
        return Handoffs(self._store_calls, self._loop_calls)

    # -- from the loop ---------------------------------------------------------------------

    def call(self, fn: Callable[[], T]) -> "asyncio.Future[T]":
        """On the loop: `fn` queued, its outcome to the returned future (awaited directly, not
        through another coroutine: each frame in an await chain is resumed on every wake-up)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self.submit(fn, future, self.channel(loop))
        return future

    def channel(self, loop: asyncio.AbstractEventLoop) -> _Channel:
        channel = self._channels.get(loop)
        if channel is None:
            channel = self._channels[loop] = _Channel(loop)
        return channel

    def submit(self, fn: Callable[[], Any], future: "asyncio.Future[Any] | None" = None,
               channel: _Channel | None = None) -> None:
        """Queue `fn` (its outcome to `future`, through `channel`; none: nobody waits for it)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the store threads were shut down")
            self._store_calls += 1
            self._queue.append(_Call(fn, future, channel))
            wakes = self._dispatch()
        for wake in wakes:
            wake.release()

    def shutdown(self) -> None:
        """Refuse new calls; each thread ends once the queued calls are done."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.wake.release()  # with no call: it ends

    # -- from a store thread ----------------------------------------------------------------

    def on_loop(self, loop: asyncio.AbstractEventLoop, awaitable: Any) -> LoopCall:
        """Start `awaitable` on `loop` (wait with `wait`)."""
        with self._lock:
            self._loop_calls += 1
        return LoopCall(self.channel(loop), awaitable)

    def wait(self, call: LoopCall) -> Any:
        """Wait for a loop call's outcome without holding a slot (nor the thread's fork guard)."""
        began = time.perf_counter()
        self.pause()
        try:
            return call.result()
        finally:
            self.resume()
            running = getattr(_running, "call", None)
            if running is not None:
                running.waited += time.perf_counter() - began

    def pause(self) -> None:
        """In a store thread about to wait (for the loop, for its group's commit): its slot goes
        back, and its fork guard, so that a rebuild may fork while it waits."""
        self.give_back()
        guard = getattr(threading.current_thread(), "fork_guard", None)
        if guard is not None:
            guard.release()

    def resume(self) -> None:
        guard = getattr(threading.current_thread(), "fork_guard", None)
        if guard is not None:
            guard.acquire()
        self.take_back()

    def give_back(self) -> None:
        with self._lock:
            self._free += 1
            wakes = self._dispatch()
        for wake in wakes:
            wake.release()

    def take_back(self) -> None:
        with self._lock:
            if self._free:
                self._free -= 1
                return
            handed = threading.Lock()
            handed.acquire()
            self._wanting_slot.append(handed)
        handed.acquire()  # the slot is counted as ours by whoever released this

    # -- inside ------------------------------------------------------------------------------

    def _dispatch(self) -> list[threading.Lock]:
        """Under the lock: hand free slots to threads waiting to take one back, then queued calls
        to idle threads; returns the locks to release (after the lock)."""
        wakes = []
        while self._free:
            if self._wanting_slot:
                wakes.append(self._wanting_slot.popleft())
            elif self._queue and self._idle:
                worker = self._idle.pop()
                worker.call = self._queue.popleft()
                wakes.append(worker.wake)
            else:
                break
            self._free -= 1
        return wakes

    def _work(self, ready: threading.Barrier) -> None:
        me = _Worker()
        # Held while the thread runs a call: a rebuild that forks helper processes takes every
        # thread's guard first (projections/parallel.py), so none is inside SQLite at the fork.
        guard = threading.Lock()
        threading.current_thread().fork_guard = guard  # type: ignore[attr-defined]
        with self._lock:
            self._idle.append(me)
        ready.wait()
        # A save waiting for its group commit gives the slot back, so that the group can grow.
        with giving_back(self.pause, self.resume):
            while not me.ended:
                me.wake.acquire()
                call, me.call = me.call, None
                if call is None:
                    return  # shut down while idle
                while call is not None:
                    with guard:
                        call.run()
                    call = self._next(me)

    def _next(self, me: _Worker) -> _Call | None:
        """After a call: the slot goes to a thread waiting to take one back, else to the next queued
        call, run by this thread at once; else this thread goes idle (or ends, once shut down)."""
        with self._lock:
            self._free += 1
            if self._queue and not self._wanting_slot:
                self._free -= 1
                return self._queue.popleft()
            wakes = self._dispatch()
            if self._closed:
                me.ended = True
            else:
                self._idle.append(me)
        for wake in wakes:
            wake.release()
        return None
