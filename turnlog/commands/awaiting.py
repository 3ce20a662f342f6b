"""Awaiting a gateway callback's coroutine from the sync engine's threads.

A callback the gateway supplies (the summariser) may be a coroutine function. The asyncio API runs
engine work in worker threads and awaits such a coroutine on its own event loop (`on_loop`); the
sync API, which has no loop of its own, runs it with asyncio.run in a worker thread (the calling
thread may be inside a running loop, where asyncio.run is refused).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
from typing import Any, Awaitable, Callable, Iterator

Awaiter = Callable[[Awaitable[Any]], Any]

_AWAITER: contextvars.ContextVar[Awaiter | None] = contextvars.ContextVar("turnlog_awaiter", default=None)


@contextlib.contextmanager
def on_loop(awaiter: Awaiter) -> Iterator[None]:
    """Within the block (in this thread), callbacks' coroutines are awaited by `awaiter`."""
    reset = _AWAITER.set(awaiter)
    try:
        yield
    finally:
        _AWAITER.reset(reset)


def resolved(value: Any) -> Any:
    """`value`, or what it gives when awaited."""
    if not inspect.isawaitable(value):
        return value
    awaiter = _AWAITER.get()
    if awaiter is not None:
        return awaiter(value)
    return _run_apart(value)


def _run_apart(awaitable: Awaitable[Any]) -> Any:
    result: dict[str, Any] = {}

    async def wait() -> Any:
        return await awaitable

    def run() -> None:
        try:
            result["value"] = asyncio.run(wait())
        except BaseException as failure:  # noqa: BLE001 - re-raised in the caller's thread
            result["error"] = failure
    worker = threading.Thread(target=run, name="turnlog-await", daemon=True)
    worker.start()
    worker.join()
    if "error" in result:
        raise result["error"]
    return result["value"]
