"""Maintenance of what is derived from the log: catching the read models up, rebuilding,
verifying and repairing them, and the hash chain. The log itself is never changed here.

A read-only open (`read_only`) catches nothing up and seals nothing; its rebuilds and repairs
are refused (ReadOnlyDatabase) by the runner. With `lock_wait`, a catch-up that finds another
process holding the write lock longer than that gives way: from then on the read models are
read as of their positions (`stale`), as a read-only open reads them.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Callable, Iterable

from .errors import InvalidRequest, ReadOnlyDatabase
from .storage.sqlite_errors import is_busy
from .projections import verify as _verify
from .storage.chain import ChainBreak, ChainReport, ChainSealer
from .projections.runner import ProjectionRunner


class Maintenance:
    def __init__(self, runner: ProjectionRunner, chain: ChainSealer | None, *, read_only: bool,
                 display: str, lock_wait: float | None = None) -> None:
        self.runner = runner
        self.chain = chain
        self.read_only = read_only
        self.display = display
        self.lock_wait = lock_wait
        self.stale = read_only

    def catch_up(self, names: Iterable[str] | None = None) -> int:
        """Bring the read models (`names`, or all of them and the hash chain) up to the log."""
        if self.stale:
            return 0
        # One read-model connection serves every thread of a Turnlog: one user at a time.
        with self.runner.lock:
            try:
                with self.runner.waiting_at_most(self.lock_wait):
                    applied = self.runner.catch_up(names)
                    if names is None:
                        self.seal()
            except sqlite3.OperationalError as e:
                if self.lock_wait is None or not is_busy(e):
                    raise
                self.stale = True  # a pass writes in one transaction: nothing was half-applied
                return 0
            return applied

    def seal(self) -> int:
        return 0 if self.read_only or self.chain is None else self.chain.seal()

    def verify_chain(self) -> list[ChainBreak]:
        return self.chain_report().breaks

    def chain_report(self) -> ChainReport:
        """The chain's breaks, and the range of events sealed late (written before sealing on write)."""
        if self.chain is None:
            raise ReadOnlyDatabase(f"{self.display} has no hash chain yet, and sealing one needs to write")
        self.seal()  # nothing to do on SQLite: verifying never vouches for what it finds there
        return self.chain.report()

    def rebuild(self, names: Iterable[str] | None = None, *, progress: Callable[[int, int], None] | None = None,
                pause: float = 0.0, batch: int | None = None, workers: int | None = None) -> dict[str, Any]:
        for what, value in (("batch", batch), ("workers", workers)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise InvalidRequest(f"{what} must be a positive whole number, not {value!r}")
        return self.runner.run_rebuild(self.names(names), progress=progress, pause=pause, batch=batch,
                                       workers=workers).to_dict()

    def status(self) -> list[dict[str, Any]]:
        return self.runner.status()

    def behind(self) -> int:
        return max((s["behind"] for s in self.status()), default=0)

    def verify(self, names: Iterable[str] | None = None) -> dict[str, Any]:
        return _verify.verify(self.runner, self.names(names))

    def doctor(self, *, repair: bool = True, deep: bool = False) -> dict[str, Any]:
        return _verify.doctor(self.runner, repair=repair, deep=deep)

    def names(self, names: Iterable[str] | None) -> list[str] | None:
        """The projections named (None: all), each checked to exist."""
        selected = list(names) if names is not None else None
        known = self.runner.projections
        unknown = sorted(set(selected or ()) - set(known))
        if unknown:
            raise InvalidRequest(f"unknown projection {unknown[0]!r} (known: {', '.join(known)})")
        return selected
