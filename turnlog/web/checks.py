"""Integrity checks run in the background: at most one running per kind, and a bounded list of
finished ones, so that no number of requests can pile up threads or memory."""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

KEPT = 20  # finished checks remembered for the page, newest last


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


class Checks:
    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, Job] = OrderedDict()

    def values(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def running(self, check: str) -> Job | None:
        with self._lock:
            return next((j for j in self._jobs.values() if j.check == check and j.state == "running"), None)

    def start(self, check: str, steps: Callable[[], list[tuple[str, Callable[[], Any]]]],
              done: Callable[[], None] = lambda: None) -> tuple[Job, bool]:
        """Run `steps()` in a thread, or return the check of this kind already running; True if
        started. `done` is called once the thread ends (or at once when nothing is started)."""
        with self._lock:
            running = next((j for j in self._jobs.values() if j.check == check and j.state == "running"), None)
            if running is not None:
                done()
                return running, False
            try:
                planned = steps()
            except BaseException:
                done()
                raise
            job = Job(uuid.uuid4().hex[:12], check, total=len(planned), result={})
            self._jobs[job.id] = job
            self._forget_old()

        def run() -> None:
            try:
                for name, step in planned:
                    job.result[name] = step()
                    job.done += 1
                job.state = "done"
            except Exception as e:  # a check that fails is shown on the page, not lost in a thread
                job.state, job.error = "failed", f"{type(e).__name__}: {e}"
            finally:
                done()

        threading.Thread(target=run, name=f"turnlog-web-{check}", daemon=True).start()
        return job, True

    def _forget_old(self) -> None:
        finished = [j.id for j in self._jobs.values() if j.state != "running"]
        for job_id in finished[:max(0, len(self._jobs) - self.kept)]:
            del self._jobs[job_id]
