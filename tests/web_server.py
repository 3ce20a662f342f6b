"""A real uvicorn server for a viewer app, in a thread of the test process, for tests that need
concurrent requests."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

import uvicorn

WAIT_S = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """The app served on a free loopback port; yields its base URL."""
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT_S
    while not srv.started:  # uvicorn offers no event for this; a bounded wait for its flag
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{srv.config.port}"
    finally:
        srv.should_exit = True
        thread.join(timeout=WAIT_S)


@contextmanager
def held(monkeypatch: Any, cls: Any, method: str, times: int = 1) -> Iterator[tuple[list[threading.Event], threading.Event]]:
    """Make cls.<method> wait, once entered, until the test sets the release event; the i-th call
    sets entered[i] (up to `times`)."""
    entered = [threading.Event() for _ in range(times)]
    release = threading.Event()
    original = getattr(cls, method)
    calls = iter(entered)
    lock = threading.Lock()

    def waiting(self: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            mine = next(calls, None)
        if mine is not None:
            mine.set()
        assert release.wait(WAIT_S), "the test never released the request"
        return original(self, *args, **kwargs)
    monkeypatch.setattr(cls, method, waiting)
    try:
        yield entered, release
    finally:
        release.set()
