"""Rebuilds read models from the log into fresh tables and swaps them in; and fills a copy for
verification.

A rebuild fills fresh tables (`<table>__rebuild`) from position 0 with its own tracked position
(table `projection_rebuilds`), committing batch by batch, so a killed rebuild resumes where it
stopped. When it has reached the log's head it swaps: in one transaction the live tables are
dropped, the fresh ones renamed into place, the secondary indexes built (deferred until now),
and the live position set. Readers see a projection's old tables or its new ones, never a mix.
A large rebuild is shared with a helper process (parallel.py) that fills part of the fresh
tables; this process swaps its own part in as soon as it is done, the helper's part after it.

The batches are read and applied by the runner's catch-up pass (runner.py), into the fresh
tables instead of the live ones. Speed: a rebuild commits every REBUILD_BATCH events and
checkpoints the WAL rarely (benchmarks/bench_search.py).
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Callable, Iterable

from ..gc_pause import cyclic_gc_paused
from . import parallel
from .base import POSITIONS_TABLE, REBUILD_SUFFIX, REBUILDS_TABLE, Tables
from .runner_protocol import CatchingUp
from .views_file import Target, is_corruption

REBUILD_BATCH = 20000  # fewer, larger transactions: a rebuild's rows are new, nobody waits on them
REBUILD_WAL_PAGES = 65536  # checkpoint the WAL every 256 MiB instead of 4 MiB while rebuilding
ELSEWHERE = "helper"  # the name a helper's file is attached under

Progress = Callable[[int, int], None]  # (events done, events to do)


@dataclass
class RebuildReport:
    projections: list[str]
    events: int = 0  # log positions this run covered
    head: int = 0
    resumed: dict[str, int] = field(default_factory=dict)  # name -> position an earlier run had reached
    seconds: float = 0.0
    workers: int = 1  # processes that shared the work

    def to_dict(self) -> dict[str, Any]:
        return {"projections": self.projections, "events": self.events, "head": self.head,
                "resumed": self.resumed, "seconds": round(self.seconds, 3), "workers": self.workers,
                "events_per_s": round(self.events / self.seconds) if self.seconds else None}



class Rebuild:
    """The rebuilds of one runner's read models (`runner`: the catch-up it fills tables with)."""

    def __init__(self, runner: CatchingUp) -> None:
        self.runner = runner
        self.db = runner.db
        self.projections = runner.projections
        self.target = Target(self.db, REBUILD_SUFFIX, REBUILDS_TABLE)

    def positions(self) -> dict[str, int]:
        """Rebuilds started and not yet swapped in: name -> the position their fresh tables reached
        (here, or in a helper's file: parallel.py)."""
        positions = self.target.positions()
        for name, position in parallel.helper_positions(self.runner).items():
            if name in positions:
                positions[name] = max(positions[name], position)
        return {name: pos for name, pos in positions.items() if name in self.projections}

    def run(self, names: Iterable[str] | None = None, *, progress: Progress | None = None,
                    pause: float = 0.0, batch: int | None = None, workers: int | None = None) -> RebuildReport:
        """`batch` events per transaction (default REBUILD_BATCH) and `pause` seconds between
        batches let a live gateway's writes through a long rebuild. `workers` processes share
        the work (parallel.py; by default two for a large rebuild on two cores or more)."""
        self.runner.refuse_if_read_only("a rebuild")
        selected = list(names) if names is not None else list(self.projections)
        report = RebuildReport(projections=selected)
        started = time.perf_counter()
        batch = batch or REBUILD_BATCH
        with self._bulk(), parallel.rebuild_lock(self.runner) as owner:
            if owner:
                self._take_helpers_work(check=True)  # what helpers of a killed rebuild had committed
            report.resumed = self._start_rebuild(selected)
            first = min(self.target.positions().get(n, 0) for n in selected)
            tell = None if progress is None else self._progress_reporter(selected, first, progress)
            groups = parallel.plan(self.runner, selected, workers if owner else 1, self.runner.head() - first)
            report.workers = len(groups)
            swapped = 0
            with parallel.helpers(self.runner, groups[1:], batch, pause, tell):
                self._fill(self.target, groups[0], batch, pause, tell)
                if len(groups) > 1:  # its own projections go live while the helpers finish theirs
                    swapped = self._swap(groups[0])
                    self.db.execute("PRAGMA wal_checkpoint(PASSIVE)")  # meanwhile too, not at the end
            if owner:
                self._take_helpers_work(check=False)
            self._fill(self.target, selected, batch, pause, tell)  # what the log gained meanwhile
            if tell is not None:
                tell()
            report.head = max(swapped, self._swap(selected))
            report.events = max(report.head - first, 0)
        report.seconds = time.perf_counter() - started
        return report

    def fill_elsewhere(self, names: list[str], path: str, *, batch: int | None = None, pause: float = 0.0) -> None:
        """Fill fresh tables of `names` up to the log's head in another SQLite file (a helper
        process's, parallel.py), with their positions, committing batch by batch; the rebuild's
        own process copies them in (`_take_helpers_work`). Writing to its own file, a helper
        never waits for the file lock of the read models' file, nor makes anyone wait for it."""
        self.db.execute("ATTACH DATABASE ? AS " + ELSEWHERE, (path,))
        try:
            # A rollback journal, not a WAL, which would be copied into the file once more when
            # the file is closed; not synced: a commit survives the process being killed (the
            # system has the writes), and after a power cut the file is checked (_take_helpers_work).
            self.db.execute(f"PRAGMA {ELSEWHERE}.journal_mode=TRUNCATE")
            self.db.execute(f"PRAGMA {ELSEWHERE}.synchronous=OFF")
            target = Target(self.db, REBUILD_SUFFIX, f"{ELSEWHERE}.{REBUILDS_TABLE}", schema=ELSEWHERE)
            assert target.table is not None  # a rebuild keeps its positions in a table
            with target.transaction():
                create_rebuilds_table(self.db, target.table)
                started = target.positions()
                for name in names:
                    if name not in started:
                        self.projections[name].create(target.tables())
                        _start_rebuild_at_zero(self.db, target.table, name)
            with self.runner.lock, cyclic_gc_paused():
                self._fill(target, names, batch or REBUILD_BATCH, pause, None)
        finally:
            self.db.execute(f"DETACH DATABASE {ELSEWHERE}")

    def _take_helpers_work(self, *, check: bool) -> None:
        """Copy into this file's fresh tables what helpers filled in theirs, where it is further
        along, with its position (one transaction), then delete the helpers' files. `check`:
        first make sure a file is sound (one a killed rebuild left); a damaged one is dropped."""
        for path in parallel.helper_files(self.runner):
            try:
                self.db.execute("ATTACH DATABASE ? AS " + ELSEWHERE, (path,))
            except sqlite3.DatabaseError:
                parallel.remove_file(path)
                continue
            try:
                sound = not check or self.db.execute(f"PRAGMA {ELSEWHERE}.quick_check").fetchone()[0] == "ok"
                if sound:
                    with self.runner.write():
                        self._copy_from_elsewhere()
            except sqlite3.DatabaseError as e:
                if not is_corruption(e):
                    raise
            finally:
                self.db.execute(f"DETACH DATABASE {ELSEWHERE}")
            parallel.remove_file(path)

    def _copy_from_elsewhere(self) -> None:
        try:
            theirs = dict(self.db.execute(f"SELECT name, position FROM {ELSEWHERE}.{REBUILDS_TABLE}").fetchall())
        except sqlite3.OperationalError:
            return  # killed before it had created its tables
        ours = self.target.positions()
        for name, position in theirs.items():
            if name not in self.projections or name not in ours or ours[name] >= position:
                continue
            fresh = [table + REBUILD_SUFFIX for table in self.projections[name].tables]
            self.db.execute("SAVEPOINT copy")
            try:
                for table in fresh:
                    self.db.execute(f"DELETE FROM main.[{table}]")
                    # Same schema, empty table: SQLite copies the records and indexes as they are.
                    self.db.execute(f"INSERT INTO main.[{table}] SELECT * FROM {ELSEWHERE}.[{table}]")
            except sqlite3.OperationalError:
                self.db.execute("ROLLBACK TO copy")  # tables of another shape: refilled from ours
            else:
                self.target.advance(name, position)
            self.db.execute("RELEASE copy")

    @contextmanager
    def _bulk(self) -> Any:
        """How a rebuild writes: this runner to itself, the cyclic collector paused, rare WAL checkpoints."""
        with self.runner.lock, cyclic_gc_paused(), _wal_checkpoints_every(self.db, REBUILD_WAL_PAGES):
            yield

    def _fill(self, target: Target, names: list[str], batch: int, pause: float,
              tell: Callable[[], None] | None) -> None:
        kept: dict[str, tuple[Any, int]] = {}
        while True:
            head = self.runner.head()
            positions = target.positions()
            behind = [n for n in names if n in positions and positions[n] < head]
            if not behind:
                return
            self.runner.run_pass(target, behind, positions, head, batch, kept)
            if tell is not None:
                tell()
            if pause:
                time.sleep(pause)

    def _progress_reporter(self, names: list[str], first: int, progress: Progress) -> Callable[[], None]:
        """Reports events done (the mean of the projections' positions) out of events to do,
        each time it changes."""
        last: list[tuple[int, int]] = []

        def tell() -> None:
            head = self.runner.head()
            positions = self.positions()
            reached = [min(positions.get(n, head), head) - first for n in names]
            now = (max(0, round(sum(reached) / len(reached))) if reached else 0, max(head - first, 1))
            if not last or last[0] != now:
                last[:] = [now]
                progress(*now)
        return tell

    def _start_rebuild(self, selected: list[str]) -> dict[str, int]:
        """Create the fresh tables of each projection, or find those a killed rebuild left."""
        resumed = {}
        with self.runner.write():
            existing = self.target.positions()
            tables = self.runner.table_names()
            for name in selected:
                p = self.projections[name]
                fresh = [t + REBUILD_SUFFIX for t in p.tables]
                if name in existing and all(t in tables for t in fresh):
                    resumed[name] = existing[name]
                    continue
                for table in fresh:
                    self.runner.drop_table(p, table)
                p.create(Tables(self.db, REBUILD_SUFFIX))
                _start_rebuild_at_zero(self.db, REBUILDS_TABLE, name)
        return {n: pos for n, pos in resumed.items() if pos > 0}

    def _swap(self, selected: list[str]) -> int:
        """Put the fresh tables in place of the live ones, in one transaction; returns the position."""
        reached = 0
        with self.runner.write():
            positions = self.target.positions()
            for name in selected:
                if name not in positions:
                    continue  # another process finished this rebuild first
                p = self.projections[name]
                for table in p.tables:
                    self.runner.drop_table(p, table)
                for table in p.tables:
                    self.db.execute(f"ALTER TABLE [{table}{REBUILD_SUFFIX}] RENAME TO [{table}]")
                p.create_indexes(Tables(self.db))
                self.db.execute(f"UPDATE {POSITIONS_TABLE} SET position=? WHERE name=?", (positions[name], name))
                self.db.execute(f"DELETE FROM {REBUILDS_TABLE} WHERE name=?", (name,))
                reached = max(reached, positions[name])
        return reached

    def discard(self, name: str) -> None:
        with self.runner.write():
            p = self.projections[name]
            for table in p.tables:
                self.runner.drop_table(p, table + REBUILD_SUFFIX)
            self.db.execute(f"DELETE FROM {REBUILDS_TABLE} WHERE name=?", (name,))

    def build_copy(self, db: sqlite3.Connection, stops: dict[str, int]) -> int:
        """Fill the projections named in `stops` into another connection, each up to its stop."""
        target = Target(db, "", None, stops)
        for name in stops:
            t = Tables(db)
            self.projections[name].create(t)
            target.memory[name] = 0
        applied = 0
        kept: dict[str, tuple[Any, int]] = {}
        with self.runner.lock, cyclic_gc_paused():
            while True:
                behind = [n for n, stop in stops.items() if target.memory[n] < stop]
                if not behind:
                    return applied
                applied += self.runner.run_pass(target, behind, target.positions(), max(stops[n] for n in behind), kept=kept)


def create_rebuilds_table(db: sqlite3.Connection, table: str) -> None:
    db.execute(f"CREATE TABLE IF NOT EXISTS {table} (name TEXT PRIMARY KEY, position INTEGER NOT NULL,"
               " started_at TEXT NOT NULL)")


def _start_rebuild_at_zero(db: sqlite3.Connection, table: str, name: str) -> None:
    db.execute(f"INSERT OR REPLACE INTO {table} (name, position, started_at) VALUES (?, 0, ?)",
               (name, datetime.now(UTC).isoformat()))


@contextmanager
def _wal_checkpoints_every(db: sqlite3.Connection, pages: int) -> Any:
    """Checkpoint this connection's commits to the WAL less often, then once at the end.

    Each checkpoint copies the WAL into the database file and syncs both: a rebuild writing
    hundreds of megabytes spent as long syncing every 4 MiB as writing.
    """
    before = db.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
    db.execute(f"PRAGMA wal_autocheckpoint={int(pages)}")
    try:
        yield
    finally:
        db.execute(f"PRAGMA wal_autocheckpoint={int(before)}")
        db.execute("PRAGMA wal_checkpoint(PASSIVE)")
