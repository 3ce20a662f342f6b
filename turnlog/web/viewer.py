"""The viewer's state: the snapshot requests read now, the one still draining after a reload,
and the running checks.

A request (or a check) holds the snapshot it started on until it ends; a reload swaps in a new
snapshot and the old one is closed, its copy removed, when the last of its users is done. At most
two snapshots exist: a reload while the previous one still drains is refused (Busy).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .checks import Checks, Job
from .snapshot import Snapshot
from .store import Busy, Copy, open_read_only, remove_stale_copies

__all__ = ["Busy", "Job", "MAX_DIFF_EVENTS", "Result", "Snapshot", "Viewer"]

# A second or two of one core (a 5,000-event diff touching 60 sessions: 1.4 s on a busy machine);
# a longer stretch of log is read by key (only its events) or in shorter steps.
MAX_DIFF_EVENTS = 5_000


@dataclass
class Result:
    """A page: its title, its data (the ?format=json twin) and its HTML body."""
    title: str
    data: dict[str, Any]
    body: Any


class Viewer:
    def __init__(self, path: str, opener: Callable[[str], Copy] = open_read_only, *,
                 max_diff_events: int = MAX_DIFF_EVENTS) -> None:
        self.path = path
        self.max_diff_events = max_diff_events
        self._opener = opener
        self._lock = threading.Lock()  # guards current, draining and the users counts
        self._reloading = threading.Lock()
        self.checks = Checks()
        remove_stale_copies()
        self.current = self._open()
        self.draining: Snapshot | None = None

    def _open(self) -> Snapshot:
        copy = self._opener(self.path)
        try:
            return Snapshot(self.path, copy, self.checks, max_diff_events=self.max_diff_events)
        except BaseException:
            copy.close()
            raise

    def acquire(self) -> Snapshot:
        """The current snapshot, held until `release(it)`."""
        with self._lock:
            snap = self.current
            snap.users += 1
            return snap

    def release(self, snap: Snapshot) -> None:
        with self._lock:
            snap.users -= 1
            last = snap.users == 0 and snap is self.draining
            if last:
                self.draining = None
        if last:
            snap.close()

    @contextmanager
    def use(self) -> Iterator[Snapshot]:
        snap = self.acquire()
        try:
            yield snap
        finally:
            self.release(snap)

    def reload(self) -> None:
        if not self._reloading.acquire(blocking=False):
            raise Busy("another reload is opening a new snapshot; try again when it is done")
        try:
            with self._lock:
                if self.draining is not None:
                    raise Busy(f"the previous snapshot still serves {self.draining.users} request(s) or check(s);"
                               " reload again when they are done")
            new = self._open()
            with self._lock:
                old, self.current = self.current, new
                idle = old.users == 0
                if not idle:
                    self.draining = old
            if idle:
                old.close()
        finally:
            self._reloading.release()

    def close(self) -> None:
        with self._lock:
            snaps = [s for s in (self.current, self.draining) if s is not None and not s.closed]
            self.draining = None
        for snap in snaps:
            snap.close()
