"""A rebuild split over worker processes: each fills the fresh tables of a group of projections.

Decoding events and building rows is Python work that one process does on one core; the
projections are independent, so N workers each rebuild a group of them (every worker reads the
log itself) while SQLite serialises their short write transactions. The workers only fill: when
all are done, this process resumes the rebuild of every projection (reading whatever the log
gained meanwhile) and swaps them all in one transaction, as a one-process rebuild does. A worker
dies with the process that started it, and whatever it committed is kept for the next run.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import time
from typing import Callable

from ..errors import StoreError
from .runner import ProjectionRunner, RebuildReport

POLL_S = 0.2


def partition(runner: ProjectionRunner, names: list[str], jobs: int) -> list[list[str]]:
    """Groups of about equal work: a projection's `weight` (default 1) says how heavy it is."""
    groups: list[tuple[float, list[str]]] = [(0.0, []) for _ in range(max(1, min(jobs, len(names))))]
    weighted = sorted(names, key=lambda n: -getattr(runner.projections[n], "weight", 1))
    for name in weighted:
        load, members = min(groups, key=lambda g: g[0])
        groups.remove((load, members))
        groups.append((load + getattr(runner.projections[name], "weight", 1), members + [name]))
    return [sorted(members, key=names.index) for _, members in groups if members]


def rebuild(runner: ProjectionRunner, db: str, views: str | None, names: list[str], jobs: int, *,
            progress: Callable[[int, int], None] | None = None, pause: float = 0.0,
            batch: int | None = None) -> RebuildReport:
    groups = partition(runner, names, jobs)
    if len(groups) < 2:
        return runner.run_rebuild(names, progress=progress, pause=pause, batch=batch)
    started = time.perf_counter()
    resumed = runner.start_rebuild(names)
    first = min(runner.rebuilding().get(n, 0) for n in names)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_work, args=(db, views, group, batch, pause, os.getpid()), daemon=True)
               for group in groups]
    for w in workers:
        w.start()
    try:
        while any(w.is_alive() for w in workers):
            time.sleep(POLL_S)
            if progress is not None:
                _report(runner, names, first, progress)
    finally:
        for w in workers:
            if w.is_alive():
                w.terminate()
            w.join()
    failed = [w.exitcode for w in workers if w.exitcode != 0]
    if failed:
        raise StoreError(f"a rebuild worker failed (exit code {failed[0]}); what it committed is kept,"
                         " and running the rebuild again resumes it")
    filled = min(runner.rebuilding().get(n, first) for n in names) - first
    tail = None if progress is None else (lambda done, total: progress(filled + done, filled + total))
    report = runner.run_rebuild(names, progress=tail, pause=pause, batch=batch)  # the tail, and the swap
    report.events = report.head - first
    report.resumed = resumed
    report.seconds = time.perf_counter() - started
    return report


def _report(runner: ProjectionRunner, names: list[str], first: int, progress: Callable[[int, int], None]) -> None:
    head = runner.head()
    positions = runner.rebuilding()
    done = min(positions.get(n, head) for n in names) - first
    progress(max(done, 0), max(head - first, 1))


def _work(db: str, views: str | None, names: list[str], batch: int | None, pause: float, parent: int) -> None:
    _die_with(parent)
    from ..api import Turnlog

    with Turnlog(db, views=views, owner=f"rebuild-worker:{os.getpid()}") as t:
        t.projections.run_rebuild(names, batch=batch, pause=pause, swap=False,
                                  progress=lambda done, total: _die_with(parent, check_only=True))


def _die_with(parent: int, check_only: bool = False) -> None:
    """End this worker when the process that started it ends, even by SIGKILL."""
    if not check_only and sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)


def worker_count(requested: int | None) -> int:
    """The number of workers: as requested, else 1. Two help on two idle cores; on a busy
    machine the second worker's own decoding and start-up cost more than it saves."""
    return max(1, requested or 1)

