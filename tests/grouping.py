"""Lining up a group commit in a test: hold one transaction open until other threads' saves are
queued behind it, and record what each transaction wrote (tests/engine/test_group_commit.py and the
backend contract use it)."""

from __future__ import annotations

import threading
from typing import Any, Callable

from turnlog import SessionSource, Turnlog

WAIT_S = 30.0  # a bound on waits for other threads, never reached when things work


def source(n: int) -> SessionSource:
    return SessionSource(platform="telegram", chat_type="dm", chat_id=f"{100 + n}", user_id=f"{100 + n}",
                         message_id=f"m{n}")


def internals(t: Turnlog) -> tuple[Any, Any]:
    """The recorder and the group committer (the engine's private attributes: no public face)."""
    return t._app.recorder, t._ctx.commits


class Transactions:
    """Records what each write transaction inserted; can hold the next one open until told."""

    def __init__(self, t: Turnlog) -> None:
        self.recorder, self.commits = internals(t)
        self.written: list[list[str]] = []  # per committed transaction: its events' topics
        self.failed: list[list[str]] = []
        self._hold: tuple[threading.Event, threading.Event] | None = None
        original = self.recorder.insert_events

        def insert_events(stored_events: Any, **kwargs: Any) -> Any:
            hold, self._hold = self._hold, None
            if hold is not None:
                hold[0].set()
                assert hold[1].wait(WAIT_S)
            topics = [s.topic.rpartition(":")[2].rpartition(".")[2] for s in stored_events]
            try:
                positions = original(stored_events, **kwargs)
            except Exception:
                self.failed.append(topics)
                raise
            self.written.append(topics)
            return positions
        self.recorder.insert_events = insert_events

    def hold_next(self, entered: threading.Event, release: threading.Event) -> None:
        """The next transaction sets `entered`, then waits for `release` before it writes."""
        self._hold = (entered, release)

    def group_behind(self, first: Callable[[], Any], others: list[Callable[[], Any]]) -> list[Any]:
        """Run `first` in a thread, hold its transaction until every one of `others` (each in its
        own thread) is queued behind it, then let it go; returns each call's result or exception."""
        entered, release = threading.Event(), threading.Event()
        self.hold_next(entered, release)
        results: list[Any] = [None] * (1 + len(others))

        def call(i: int, fn: Callable[[], Any]) -> None:
            try:
                results[i] = fn()
            except Exception as e:  # noqa: BLE001 - the test looks at it
                results[i] = e
        threads = [threading.Thread(target=call, args=(0, first))]
        threads[0].start()
        assert entered.wait(WAIT_S)
        for i, fn in enumerate(others, start=1):
            threads.append(threading.Thread(target=call, args=(i, fn)))
            threads[-1].start()
        assert self.commits.wait_queued(len(others), WAIT_S)
        release.set()
        for thread in threads:
            thread.join(WAIT_S)
        return results
