"""The viewer's state: the open (read-only) store, what it was at open, and running checks."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from ..api import Turnlog
from ..errors import NotFound
from . import log_queries
from .store import open_read_only


@dataclass
class Result:
    """A page: its title, its data (the ?format=json twin) and its HTML body."""
    title: str
    data: dict[str, Any]
    body: Any


@dataclass
class Job:
    id: str
    check: str
    total: int
    done: int = 0
    state: str = "running"
    result: Any = None
    error: str | None = None
    started: float = field(default_factory=time.monotonic)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "check": self.check, "state": self.state, "done": self.done, "total": self.total,
                "result": self.result, "error": self.error}


class Viewer:
    def __init__(self, path: str, opener: Callable[[str], Turnlog] = open_read_only) -> None:
        self.path = path
        self._opener = opener
        self._lock = threading.Lock()
        self.jobs: dict[str, Job] = {}
        self._cache: dict[Any, Any] = {}
        self.t = self._open()

    def _open(self) -> Turnlog:
        t = self._opener(self.path)
        # What the file held when it was opened, before this viewer caught anything up.
        self.status_at_open = t.projection_status()
        self.opened_at = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())
        self.head_at_open = log_queries.head(t)
        return t

    def reload(self) -> None:
        with self._lock:
            old, self.t = self.t, self._open()
            self._cache.clear()
        old.close()

    def close(self) -> None:
        self.t.close()

    @property
    def banner(self) -> str:
        return f"{self.path} · #{self.head_at_open} · opened {self.opened_at}"

    def cached(self, key: Any, compute: Callable[[], Any]) -> Any:
        """Values that depend only on the whole log (the plot, the session list): computed again
        only when the log's head has moved."""
        head = log_queries.head(self.t)
        hit = self._cache.get(key)
        if hit is None or hit[0] != head:
            hit = self._cache[key] = (head, compute())
        return hit[1]

    def sessions(self) -> dict[str, dict[str, Any]]:
        """Every session by id, in creation order."""
        return self.cached("sessions", lambda: {s["session_id"]: s for s in self.t.sessions()})

    def routing_keys(self) -> dict[str, list[str]]:
        """The routing keys that point at each session now."""
        def build() -> dict[str, list[str]]:
            keys: dict[str, list[str]] = {}
            for r in self.t.routes():
                if r["session_id"]:
                    keys.setdefault(r["session_id"], []).append(r["session_key"])
            return keys
        return self.cached("routing_keys", build)

    def session(self, session_id: str) -> dict[str, Any]:
        found = self.sessions().get(session_id)
        if found is None:
            raise NotFound(f"no session {session_id!r}")
        return found

    def start(self, check: str, steps: list[tuple[str, Callable[[], Any]]]) -> Job:
        job = Job(uuid.uuid4().hex[:12], check, total=len(steps), result={})
        self.jobs[job.id] = job

        def run() -> None:
            try:
                for name, step in steps:
                    job.result[name] = step()
                    job.done += 1
                job.state = "done"
            except Exception as e:  # a check that fails is shown on the page, not lost in a thread
                job.state, job.error = "failed", f"{type(e).__name__}: {e}"

        threading.Thread(target=run, name=f"turnlog-web-{check}", daemon=True).start()
        return job
