"""Maintenance of what is derived from the log: catching the read models up, rebuilding,
verifying and repairing them, and the hash chain. The log itself is never changed here.

A Turnlog's `maintenance` group is an instance of this class: what an operator runs (the
`turnlog rebuild`, `verify` and `doctor` commands call it) and what a gateway rarely needs.
A read-only open (`read_only`) catches nothing up and seals nothing; its rebuilds and repairs
are refused (ReadOnlyDatabase) by the runner. With `lock_wait`, a catch-up that finds another
process holding the write lock longer than that gives way: from then on the read models are
read as of their positions (`stale`), as a read-only open reads them.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .errors import InvalidRequest, ReadOnlyDatabase
from .projections import reindex as _reindex
from .projections import verify as _verify
from .storage.chain import ChainReport, ChainSealer
from .storage.sqlite_errors import is_busy
from .projections.base import TypedRow
from .projections.runner import ProjectionRunner


@dataclass(frozen=True)
class ProjectionPosition(TypedRow):
    """Where a read model stands: the log `position` it has applied, the log's `head`, how far
    `behind` it is, and where an unfinished rebuild of it stopped (None: none under way)."""
    name: str
    position: int
    head: int
    behind: int
    rebuild_position: int | None


class Maintenance:
    """The read models and the hash chain of one Turnlog (`t.maintenance`).

    Projection `names` are those of `projection_status()` (routes, sessions, timeline, ledger,
    queue, leases, route_history, search, counts); None means all of them."""

    def __init__(self, runner: ProjectionRunner, chain: ChainSealer | None, *, read_only: bool,
                 display: str, lock_wait: float | None = None) -> None:
        self._runner = runner
        self._chain = chain
        self._read_only = read_only
        self._display = display
        self._lock_wait = lock_wait
        self._stale = read_only

    @property
    def stale(self) -> bool:
        """Whether the read models are read as of their positions, not caught up: a read-only open,
        or another process held the write lock longer than `lock_wait`."""
        return self._stale

    def catch_up(self, names: Iterable[str] | None = None) -> int:
        """Bring the read models (`names`, or all of them and the hash chain) up to the log and
        return how many events were applied. Every read of the Turnlog does this first
        (read-your-writes); read-only, nothing is done and the models are read as of their positions."""
        if self._stale:
            return 0
        # One read-model connection serves every thread of a Turnlog: one user at a time.
        with self._runner.lock:
            try:
                with self._runner.waiting_at_most(self._lock_wait):
                    applied = self._runner.catch_up(names)
                    if names is None:
                        self.seal()
            except sqlite3.OperationalError as e:
                if self._lock_wait is None or not is_busy(e):
                    raise
                self._stale = True  # a pass writes in one transaction: nothing was half-applied
                return 0
            return applied

    def log_head(self) -> int:
        """The log's last position, after catching the read models up (read-only: the log's, while
        the read models stay as of their positions)."""
        self.catch_up()
        return self._runner.head()

    def seal(self) -> int:
        """Extend the hash chain over unsealed events: 0 on SQLite, where each write seals its
        own events; a PostgreSQL log is sealed after the fact (reads do this too)."""
        return 0 if self._read_only or self._chain is None else self._chain.seal()

    def verify_chain(self) -> ChainReport:
        """Recompute the hash chain from the log: `breaks` are the positions of edited, deleted,
        moved or unsealed events, `sealed_late` the range of events written before sealing on
        write. ReadOnlyDatabase when the file has no chain yet and sealing one would write."""
        if self._chain is None:
            raise ReadOnlyDatabase(f"{self._display} has no hash chain yet, and sealing one needs to write")
        self.seal()  # nothing to do on SQLite: verifying never vouches for what it finds there
        return self._chain.report()

    def rebuild(self, names: Iterable[str] | None = None, *, progress: Callable[[int, int], None] | None = None,
                pause: float = 0.0, batch: int | None = None, workers: int | None = None) -> dict[str, Any]:
        """Rebuild read models from the log into fresh tables and swap them in; resumes a rebuild
        that was killed. `progress(done, total)` is called after each batch; `batch` events per
        transaction and `pause` seconds between batches let a live gateway's writes through;
        `workers` processes share the work (default: two for a large rebuild on two cores or
        more, when this process has one thread). Returns the report: `events` (log positions
        covered), `projections`, `seconds`, `events_per_s`, `workers` and `resumed`."""
        for what, value in (("batch", batch), ("workers", workers)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise InvalidRequest(f"{what} must be a positive whole number, not {value!r}")
        if (not isinstance(pause, (int, float)) or isinstance(pause, bool) or not math.isfinite(pause)
                or not 0 <= pause <= threading.TIMEOUT_MAX):
            raise InvalidRequest(f"pause must be a number of seconds from 0 to {threading.TIMEOUT_MAX:.0f}, not {pause!r}")
        return self._runner.run_rebuild(self._names(names), progress=progress, pause=pause, batch=batch,
                                        workers=workers).to_dict()

    def rebuild_search_index(self) -> dict[str, Any]:
        """Rebuild the search model's full-text indexes (words, and the CJK trigram index) from
        its own rows, without reading the log, in one transaction: what a damaged index needs
        (Hermes' rebuild_fts). The model is caught up first; one behind the log or missing is
        refused (StoreError: `rebuild(["search"])` rebuilds it from the log), as is a run beside
        another rebuild. Returns `messages` and `cjk_messages` indexed, and `seconds`."""
        self.catch_up(["search"])
        return _reindex.reindex(self._runner, "search")

    def projection_status(self) -> list[ProjectionPosition]:
        """Where each read model stands against the log."""
        return [ProjectionPosition(**p) for p in self._runner.status()]

    def projections_behind(self) -> int:
        """How many log positions the furthest-behind read model lags the log (0: caught up)."""
        return max((p.behind for p in self.projection_status()), default=0)

    def verify(self, names: Iterable[str] | None = None) -> dict[str, Any]:
        """Rebuild read models from the log into a temporary file and compare them row by row with
        the live ones; `ok` is False and `projections[].tables[].differences` name the rows that differ."""
        return _verify.verify(self._runner, self._names(names))

    def doctor(self, *, repair: bool = True, deep: bool = False) -> dict[str, Any]:
        """Check the read models (SQLite, full-text indexes, unfinished rebuilds, missing tables;
        with deep=True also compare each with a rebuild) and, unless repair=False, rebuild what is
        damaged from the log. The log is never changed."""
        return _verify.doctor(self._runner, repair=repair, deep=deep)

    def _names(self, names: Iterable[str] | None) -> list[str] | None:
        """The projections named (None: all), each checked to exist."""
        selected = [names] if isinstance(names, str) else list(names) if names is not None else None
        known = self._runner.projections
        unknown = sorted(set(selected or ()) - set(known))
        if unknown:
            raise InvalidRequest(f"unknown projection {unknown[0]!r} (known: {', '.join(known)})")
        return selected
