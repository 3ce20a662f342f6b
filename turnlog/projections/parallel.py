"""A rebuild shared by two processes: this one and a helper forked for part of the projections.

Decoding events and building rows is Python work, one core per process; the projections are
independent, so a helper process fills the fresh tables of some while this process fills the
others, and then this process catches every one up to the log's head and swaps them all in one
transaction, as a one-process rebuild does. SQLite lets one connection write at a time: the
processes take turns through a file lock around each write transaction (a blocking lock wakes
the waiter at once, where SQLite's own busy wait sleeps up to 100 ms a try). Whatever either
committed is kept: a rebuild killed midway resumes from each projection's own position.

The helper is forked, not spawned (no second start-up), and only from a process with one thread:
a fork copies no other thread, so a lock another thread held would stay held in the child. It
opens its own connection and never uses the parent's. It dies with its parent.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import signal
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..errors import StoreError

if TYPE_CHECKING:
    from .runner import ProjectionRunner

PARALLEL_MIN_EVENTS = 100_000  # below this, starting a helper costs more than it saves
POLL_S = 0.05


class FileLock:
    """An exclusive lock on a file, held around each write transaction of a shared rebuild."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def __enter__(self) -> "FileLock":
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: Any) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self.fd)


def can_share(runner: "ProjectionRunner") -> bool:
    return hasattr(os, "fork") and threading.active_count() == 1 and runner.log.direct


def plan(runner: "ProjectionRunner", names: list[str], workers: int | None, todo: int) -> list[list[str]]:
    """The projections each process rebuilds (this process the first group): groups of about
    equal `weight` (a projection's relative rebuild cost, 1 by default; the projections' own
    weights were measured on the standard workload so that both processes finish together).
    `workers` None: two on a machine with two cores or more for a rebuild of at least
    PARALLEL_MIN_EVENTS events."""
    if workers is None:
        workers = 2 if (os.cpu_count() or 1) >= 2 and todo >= PARALLEL_MIN_EVENTS else 1
    workers = max(1, min(workers, len(names)))
    if workers == 1 or not can_share(runner):
        return [names]
    loads: list[tuple[float, list[str]]] = [(0.0, []) for _ in range(workers)]
    for name in sorted(names, key=lambda n: -_weight(runner, n)):
        i = min(range(workers), key=lambda k: loads[k][0])
        loads[i] = (loads[i][0] + _weight(runner, name), loads[i][1] + [name])
    return [sorted(group, key=names.index) for _, group in loads if group]


def _weight(runner: "ProjectionRunner", name: str) -> float:
    p = runner.projections[name]
    return float(getattr(p, "weight", None) or getattr(getattr(p, "inner", None), "weight", None) or 1)


def lock_path(runner: "ProjectionRunner") -> str:
    return runner.views_path + "-rebuild.lock"


@contextmanager
def helpers(runner: "ProjectionRunner", groups: list[list[str]], batch: int, pause: float,
            progress: Callable[[], None] | None = None) -> Iterator[None]:
    """Fork a helper per group to fill their fresh tables while the body runs; wait for them
    after it (calling `progress` meanwhile). Raises StoreError if a helper failed."""
    if not groups:
        yield
        return
    lock = FileLock(lock_path(runner))
    runner.write_lock = lock
    pids: list[int] = []
    try:
        for group in groups:
            pids.append(_fork(runner, group, batch, pause))
        yield
        failed = _wait(pids, progress)
        if failed:
            raise StoreError(f"a rebuild helper process failed ({failed}); what it committed is kept,"
                             " and running the rebuild again resumes it")
    finally:
        for pid in pids:
            _stop(pid)
        runner.write_lock = None
        lock.close()


def _fork(runner: "ProjectionRunner", group: list[str], batch: int, pause: float) -> int:
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        _die_with(parent)
        from .runner import ProjectionRunner

        helper = ProjectionRunner(runner.app, runner.views_path, list(runner.projections.values()))
        helper.write_lock = FileLock(lock_path(runner))
        helper.fill(group, batch=batch, pause=pause)
        helper.close()
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def _wait(pids: list[int], progress: Callable[[], None] | None) -> str:
    failed = ""
    waiting = list(pids)
    while waiting:
        for pid in list(waiting):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                waiting.remove(pid)
                if os.waitstatus_to_exitcode(status) != 0:
                    failed = f"exit status {os.waitstatus_to_exitcode(status)}"
        if waiting:
            if progress is not None:
                progress()
            time.sleep(POLL_S)
    return failed


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _die_with(parent: int) -> None:
    """End this helper when the process that started it ends, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)
