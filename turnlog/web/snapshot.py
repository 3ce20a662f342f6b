"""One open snapshot of the database: what the pages of a request read, what it was at open,
the values cached over it, and how many requests (or checks) are using it now."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from .. import NotFound, Turnlog
from .checks import Checks
from .store import Copy


class Snapshot:
    def __init__(self, path: str, copy: Copy, checks: Checks, *, max_diff_events: int | None = None) -> None:
        self.path = path
        self.max_diff_events = max_diff_events
        self.copy = copy
        self.t: Turnlog = copy.t
        self.checks = checks
        self._lock = threading.Lock()
        self._cache: dict[Any, Any] = {}
        self.users = 0
        self.closed = False
        # What the file held when it was opened, before this viewer caught anything up.
        self.status_at_open = [p.to_dict() for p in self.t.maintenance.projection_status()]
        self.opened_at = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())
        self.head_at_open = self.t.maintenance.log_head()

    def close(self) -> None:
        self.closed = True
        self.copy.close()

    @property
    def banner(self) -> str:
        return f"{self.path} · #{self.head_at_open} · opened {self.opened_at}"

    def cached(self, key: Any, compute: Callable[[], Any]) -> Any:
        """Values that depend only on the whole log (the plot, the session list): computed again
        only when the log's head has moved."""
        head = self.t.maintenance.log_head()
        with self._lock:
            hit = self._cache.get(key)
        if hit is None or hit[0] != head:
            hit = (head, compute())
            with self._lock:
                self._cache[key] = hit
        return hit[1]

    def sessions(self) -> dict[str, dict[str, Any]]:
        """Every session by id, in creation order."""
        return self.cached("sessions", lambda: {s.session_id: s.to_dict() for s in self.t.sessions()})

    def routing_keys(self) -> dict[str, list[str]]:
        """The routing keys that point at each session now."""
        def build() -> dict[str, list[str]]:
            keys: dict[str, list[str]] = {}
            for r in self.t.routes():
                if r.session_id:
                    keys.setdefault(r.session_id, []).append(r.session_key)
            return keys
        return self.cached("routing_keys", build)

    def session(self, session_id: str) -> dict[str, Any]:
        found = self.sessions().get(session_id)
        if found is None:
            raise NotFound(f"no session {session_id!r}")
        return found
