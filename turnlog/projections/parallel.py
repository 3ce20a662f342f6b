"""A rebuild shared by two processes: this one and a helper forked for part of the projections.

Decoding events and building rows is Python work, one core per process; the projections are
independent, so a helper process fills the fresh tables of some while this process fills the
others. The helper writes them into a file of its own (`<views>-rebuild-part1.db`), so neither
process ever waits for the other's writes (SQLite lets one connection write a file at a time,
and writing was most of a rebuild's time). When it is done, this process copies its tables in
(SQLite copies same-shaped tables record by record, without rebuilding them), catches them up
to the log's head and swaps them in; its own projections it swapped in as soon as it had filled
them, while the helper worked. Whatever either committed is kept: a rebuild killed midway
copies in what the helper's file holds and resumes from each projection's own position.

A helper takes only projections with a writer of their own (`writer(tables)`), no virtual
tables (a full-text index's tables cannot be copied into another index) and a fresh start; the
others stay with this process, which also copies and swaps.

The helper is forked, not spawned (no second start-up), and only from a process with one thread:
a fork copies no other thread, so a lock another thread held would stay held in the child. It
opens its own connection and never uses the parent's. It dies with its parent.
"""

from __future__ import annotations

import ctypes
import fcntl
import glob
import itertools
import os
import signal
import sqlite3
import sys
import threading
import time
import traceback
from pathlib import Path
from contextlib import contextmanager
from typing import Callable, Iterator

from ..errors import StoreError
from ..storage.sql import rows_in
from ..storage.uri import file_uri
from ..storage.dbfile import REBUILD_LOCK
from .base import REBUILD_SUFFIX, REBUILDS_TABLE
from .runner_protocol import CatchingUp

PARALLEL_MIN_EVENTS = 100_000  # below this, starting a helper costs more than it saves
SWAP_WEIGHT = 2.5  # this process swaps its projections in while helpers work (in projection weights)
POLL_S = 0.05


def can_share(runner: CatchingUp) -> bool:
    return hasattr(os, "fork") and _busy_threads() == 0 and runner.log.direct


def _busy_threads() -> int:
    """Threads, besides this one, other than those that can be held still while we fork: a thread
    with a `fork_guard` lock (the lease keeper, the WAL checkpointer, a store thread of the asyncio
    face) does its work only while holding it, so with the guard in our hand it holds no lock
    (SQLite's included) that the child could need."""
    me = threading.current_thread()
    return sum(1 for t in threading.enumerate() if t is not me and getattr(t, "fork_guard", None) is None)


@contextmanager
def _threads_held_still() -> Iterator[None]:
    me = threading.current_thread()
    guards = [g for t in threading.enumerate() if t is not me and (g := getattr(t, "fork_guard", None)) is not None]
    for guard in guards:
        guard.acquire()
    try:
        yield
    finally:
        for guard in guards:
            guard.release()


def plan(runner: CatchingUp, names: list[str], workers: int | None, todo: int) -> list[list[str]]:
    """The projections each process rebuilds (this process the first group): groups of about
    equal `weight` (a projection's relative rebuild cost, 1 by default; the projections' own
    weights were measured on the standard workload so that the processes finish together),
    this process's counting its swapping. `workers` None: two on a machine with two
    cores or more for a rebuild of at least PARALLEL_MIN_EVENTS events."""
    if workers is None:
        workers = 2 if (os.cpu_count() or 1) >= 2 and todo >= PARALLEL_MIN_EVENTS else 1
    started = runner.rebuilding()
    movable = [n for n in names if _movable(runner, n, started)]
    workers = max(1, min(workers, len(movable) + 1))
    if workers == 1 or not can_share(runner):
        return [names]
    staying = [n for n in names if n not in movable]
    fixed = SWAP_WEIGHT + sum(_weight(runner, n) for n in staying)
    weights = [_weight(runner, n) for n in movable]
    groups: list[list[str]] = [staying] + [[] for _ in range(workers - 1)]
    for name, group in zip(movable, _balanced(weights, workers, fixed)):
        groups[group].append(name)
    groups = [sorted(group, key=names.index) for group in groups]
    return [groups[0]] + [g for g in groups[1:] if g]


def _balanced(weights: list[float], workers: int, fixed: float) -> tuple[int, ...]:
    """The group of each weight such that the heaviest group is as light as can be (group 0
    starts at `fixed`): every assignment when there are few, else the heaviest first to the
    lightest group."""
    def heaviest(assignment: tuple[int, ...]) -> float:
        loads = [fixed] + [0.0] * (workers - 1)
        for weight, group in zip(weights, assignment):
            loads[group] += weight
        return max(loads)

    if workers ** len(weights) <= 5000:
        return min(itertools.product(range(workers), repeat=len(weights)), key=heaviest)
    loads = [fixed] + [0.0] * (workers - 1)
    assignment = [0] * len(weights)
    for i in sorted(range(len(weights)), key=lambda k: -weights[k]):
        group = min(range(workers), key=lambda k: loads[k])
        assignment[i] = group
        loads[group] += weights[i]
    return tuple(assignment)


def _movable(runner: CatchingUp, name: str, started: dict[str, int]) -> bool:
    """Whether a helper can fill this projection in a file of its own (`started`: the positions
    rebuilds have reached)."""
    p = runner.projections[name]
    if getattr(p, "inner", None) is not None or started.get(name, 0) != 0:
        return False
    tables = [*p.tables, *(t + REBUILD_SUFFIX for t in p.tables)]
    return not rows_in(runner.db, "SELECT name FROM sqlite_master WHERE name IN ({}) AND sql LIKE 'CREATE VIRTUAL%'",
                       tables)


def _weight(runner: CatchingUp, name: str) -> float:
    p = runner.projections[name]
    return float(getattr(p, "weight", None) or getattr(getattr(p, "inner", None), "weight", None) or 1)


def helper_path(runner: CatchingUp, index: int) -> str:
    return f"{runner.views_path}-rebuild-part{index}.db"


@contextmanager
def rebuild_lock(runner: CatchingUp) -> Iterator[bool]:
    """One rebuild at a time per read-model file, across processes: an exclusive lock on a file
    beside it, held while the rebuild runs (the kernel drops it when the process dies, however
    it dies). Raises StoreError while another rebuild holds it. Yields whether there is a file,
    and so helpers' files this rebuild owns (not for an in-memory or caller's-URI database)."""
    if runner.views_path.startswith("file:") or ":memory:" in runner.views_path:
        yield False
        return
    fd = os.open(runner.views_path + REBUILD_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(f"another rebuild is running on {runner.views_path}: run this one when it has"
                             " finished") from None
        yield True
    finally:
        os.close(fd)  # releases the lock


def helper_files(runner: CatchingUp) -> list[str]:
    """Files helpers filled (or were filling when they were killed)."""
    return sorted(glob.glob(glob.escape(runner.views_path) + "-rebuild-part*.db"))


def helper_positions(runner: CatchingUp) -> dict[str, int]:
    """How far helpers' fresh tables have got (for status and progress), read read-only."""
    positions: dict[str, int] = {}
    for path in helper_files(runner):
        try:
            conn = sqlite3.connect(file_uri(Path(path).resolve(), mode="ro"), uri=True, timeout=1)
            try:
                positions.update(conn.execute(f"SELECT name, position FROM {REBUILDS_TABLE}").fetchall())
            finally:
                conn.close()
        except sqlite3.Error:
            continue
    return positions


def remove_file(path: str) -> None:
    for name in (path, path + "-journal"):
        try:
            os.remove(name)
        except FileNotFoundError:
            pass


@contextmanager
def helpers(runner: CatchingUp, groups: list[list[str]], batch: int, pause: float,
            progress: Callable[[], None] | None = None) -> Iterator[None]:
    """Fork a helper per group to fill their fresh tables while the body runs; wait for them
    after it (calling `progress` meanwhile). Raises StoreError if a helper failed."""
    if not groups:
        yield
        return
    pids: list[int] = []
    try:
        for index, group in enumerate(groups, 1):
            pids.append(_fork(runner, group, helper_path(runner, index), batch, pause))
        yield
        failed = _wait(pids, progress)
        if failed:
            raise StoreError(f"a rebuild helper process failed ({failed}); what it committed is kept,"
                             " and running the rebuild again resumes it")
    finally:
        for pid in pids:
            _stop(pid)


def _fork(runner: CatchingUp, group: list[str], path: str, batch: int, pause: float) -> int:
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    with _threads_held_still():
        pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        _die_with(parent)
        helper = runner.opened_again()
        helper.fill_elsewhere(group, path, batch=batch, pause=pause)
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
