"""Keeps every read model caught up with the log from its own tracked position, and rebuilds them.

Catch-up reads the log once for all projections that are behind, in batches. A batch is read,
decoded and applied to the projections' writers (which buffer) first; one write transaction on
the read-model file then writes the buffers and advances the positions, so a crash leaves every
projection at a position it fully reflects, and the file is locked only while rows are written.

A position only moves over a committed, gap-free prefix of the log: the batch is read up to the
log's maximum position taken at the start of the pass (`target`). On SQLite a position is
assigned inside the single writer's transaction, so every position below a committed maximum is
committed too; PostgreSQL takes a table lock per insert to the same effect.

A rebuild fills fresh tables (`<table>__rebuild`) from position 0 with its own tracked position
(table `projection_rebuilds`), committing batch by batch, so a killed rebuild resumes where it
stopped. When it has reached the log's head it swaps: in one transaction the live tables are
dropped, the fresh ones renamed into place, the secondary indexes built (deferred until now),
and the live position set. Readers see a projection's old tables or its new ones, never a mix.
A large rebuild is shared with a helper process (parallel.py) that fills part of the fresh
tables; this process swaps its own part in as soon as it is done, the helper's part after it.

Speed (see benchmarks/bench_search.py): writers fold a batch's changes to a row into one write
and insert with executemany; writers and their caches live from batch to batch while nothing
else moves their projection; Python's cyclic GC is paused during a pass; the SQLite log is read
with one plain SELECT per batch and decoded without the library mapper's per-row overhead; a
writer that takes a batch of raw rows decodes only what no other writer did; a rebuild commits
every REBUILD_BATCH events and checkpoints the WAL rarely.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Callable, Iterable, Iterator, Sequence

from eventsourcing.application import Application

from ..errors import ProjectionCorrupt, ReadOnlyDatabase, StoreError, UnreadableEvent
from ..gc_pause import cyclic_gc_paused
from . import parallel
from .base import REBUILD_SUFFIX, REBUILDS_TABLE, Projection, Tables
from .simple import SimpleProjection
from ..storage.backend import Backend
from ..storage.log import LogReader, Row

BATCH = 5000
REBUILD_BATCH = 20000  # fewer, larger transactions: a rebuild's rows are new, nobody waits on them
REBUILD_WAL_PAGES = 65536  # checkpoint the WAL every 256 MiB instead of 4 MiB while rebuilding
POSITIONS_TABLE = "projection_positions"
VERSIONS_TABLE = "projection_versions"  # a projection with a `version` is refilled when it changes
ELSEWHERE = "helper"  # the name a helper's file is attached under

Progress = Callable[[int, int], None]  # (events done, events to do)


LOCK_TIMEOUT_S = 30  # how long a write to the read models waits for another process's


def connect_views(path: str, *, read_only: bool = False) -> sqlite3.Connection:
    """`read_only`: `path` is a read-only URI (storage/dbfile.py); nothing on it may write."""
    uri = path.startswith("file:")
    conn = sqlite3.connect(path, uri=uri, timeout=LOCK_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    if read_only:
        conn.execute("PRAGMA query_only=1")
    else:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    # Up to 64 MiB of pages (the default is 2 MiB): full-text queries and rebuilds re-read the
    # same index pages; the cache only grows as pages are read.
    conn.execute("PRAGMA cache_size=-65536")
    # SQLite as Debian builds it zeroes every page a DROP or DELETE frees (secure_delete=1): a
    # rebuild's swap wrote the old tables' megabytes again. FAST still overwrites deleted rows
    # where that costs no extra I/O; read models are copies of the log, nothing secret of their own.
    conn.execute("PRAGMA secure_delete=FAST")
    return conn


def is_corruption(error: BaseException) -> bool:
    """An SQLite error that says a table or index holds damaged data (not a lock, not a bug)."""
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    name = getattr(error, "sqlite_errorname", "") or ""
    return name.startswith("SQLITE_CORRUPT") or name == "SQLITE_NOTADB" or bool(
        re.search(r"malformed|corrupt|invalid fts5|vtable constructor failed", str(error), re.IGNORECASE))


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


class _Target:
    """Where a pass writes: a connection, a table-name suffix, an attached database (`schema`,
    "" for the connection's own) and where the positions are kept."""

    def __init__(self, db: sqlite3.Connection, suffix: str, table: str | None,
                 stops: dict[str, int] | None = None, schema: str = "") -> None:
        self.db = db
        self.suffix = suffix
        self.table = table  # None: positions kept in memory (a verification copy)
        self.memory: dict[str, int] = {}
        self.stops = stops or {}
        self.schema = schema

    def tables(self) -> Tables:
        return Tables(self.db, self.suffix, self.schema)

    def transaction(self) -> "_WriteTransaction":
        # Writing only to an attached file: a deferred BEGIN locks that file alone.
        return _WriteTransaction(self.db, immediate=not self.schema)

    def positions(self) -> dict[str, int]:
        if self.table is None:
            return dict(self.memory)
        return dict(self.db.execute(f"SELECT name, position FROM {self.table}").fetchall())

    def advance(self, name: str, position: int) -> None:
        if self.table is None:
            self.memory[name] = position
        else:
            self.db.execute(f"UPDATE {self.table} SET position=? WHERE name=?", (position, name))


class ProjectionRunner:
    def __init__(self, app: Application, views_path: str, projections: Sequence[Any], *,
                 read_only: bool = False, backend: Backend | None = None) -> None:
        """`backend`: where the log is (storage/backend.py), for reading it by SQL; without one it
        is read through the library's notification API."""
        self.app = app
        self.backend = backend
        # Read-only: the read models are read as of their positions, never caught up or rebuilt.
        self.read_only = read_only
        self.views_path = views_path
        self.projections: dict[str, Projection] = {
            p.name: p if hasattr(p, "writer") else SimpleProjection(p) for p in projections}
        self.db = connect_views(views_path, read_only=read_only)
        self.log = LogReader(app, self.db, backend.log_access(app, self.db) if backend is not None else None)
        self.batch = BATCH
        self._lock = threading.RLock()
        self.lock = self._lock  # held while reading the read-model connection from several threads
        self._repaired: set[str] = set()
        self._live = _Target(self.db, "", POSITIONS_TABLE)
        self._rebuilding = _Target(self.db, REBUILD_SUFFIX, REBUILDS_TABLE)
        if not read_only:
            self._ensure_schema()

    def _ensure_schema(self) -> None:
        with self._lock:
            if self._schema_is_current():
                return  # an open that only reads must not write (nor wait for the write lock)
            self._write_schema()

    def _schema_is_current(self) -> bool:
        """Whether the schema needs no change, found out without writing: with the connection
        query-only, every statement that would change something fails instead."""
        self.db.execute("PRAGMA query_only=1")
        try:
            tables = self._table_names()
            if not {POSITIONS_TABLE, REBUILDS_TABLE, VERSIONS_TABLE} <= tables:
                return False
            known = dict(self.db.execute(f"SELECT name, position FROM {POSITIONS_TABLE}").fetchall())
            versions = dict(self.db.execute(f"SELECT name, version FROM {VERSIONS_TABLE}").fetchall())
            for p in self.projections.values():
                version = getattr(p, "version", None)
                if p.name not in known or (version is not None and versions.get(p.name) != version):
                    return False
                t = Tables(self.db)
                p.create(t)
                p.create_indexes(t)
            return True
        except sqlite3.OperationalError as e:
            if getattr(e, "sqlite_errorname", "") == "SQLITE_READONLY":
                return False
            raise
        finally:
            self.db.execute("PRAGMA query_only=0")

    def _write_schema(self) -> None:
        with self._write():
            self.db.execute(
                f"CREATE TABLE IF NOT EXISTS {POSITIONS_TABLE} (name TEXT PRIMARY KEY, position INTEGER NOT NULL)")
            _create_rebuilds_table(self.db, REBUILDS_TABLE)
            self.db.execute(
                f"CREATE TABLE IF NOT EXISTS {VERSIONS_TABLE} (name TEXT PRIMARY KEY, version INTEGER NOT NULL)")
            known = dict(self.db.execute(f"SELECT name, position FROM {POSITIONS_TABLE}").fetchall())
            versions = dict(self.db.execute(f"SELECT name, version FROM {VERSIONS_TABLE}").fetchall())
            for p in self.projections.values():
                version = getattr(p, "version", None)
                if version is not None and p.name in known and versions.get(p.name, 1) != version:
                    self._reset(p)  # its tables changed shape: catch-up fills the new ones from the log
                t = Tables(self.db)
                p.create(t)
                p.create_indexes(t)
                self.db.execute(
                    f"INSERT OR IGNORE INTO {POSITIONS_TABLE} (name, position) VALUES (?, 0)", (p.name,))
                if version is not None:
                    self.db.execute(f"INSERT OR REPLACE INTO {VERSIONS_TABLE} (name, version) VALUES (?, ?)",
                                    (p.name, version))

    def _reset(self, p: Projection) -> None:
        for table in getattr(p, "retired", ()):  # tables an earlier version owned
            self._drop(p, table)
        for table in p.tables:
            self._drop(p, table)
            self._drop(p, table + REBUILD_SUFFIX)
        self.db.execute(f"DELETE FROM {REBUILDS_TABLE} WHERE name=?", (p.name,))
        self.db.execute(f"UPDATE {POSITIONS_TABLE} SET position=0 WHERE name=?", (p.name,))

    @contextmanager
    def waiting_at_most(self, seconds: float | None) -> Iterator[None]:
        """Writes to the read models meanwhile wait at most `seconds` (None: LOCK_TIMEOUT_S) for
        another process's write lock, then raise SQLITE_BUSY."""
        if seconds is None:
            yield
            return
        self.db.execute(f"PRAGMA busy_timeout={max(0, int(seconds * 1000))}")
        try:
            yield
        finally:
            self.db.execute(f"PRAGMA busy_timeout={LOCK_TIMEOUT_S * 1000}")

    def _refuse_if_read_only(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyDatabase(f"{what} needs to write, and {self.views_path} is open read-only")

    def _write(self) -> "_WriteTransaction":
        return _WriteTransaction(self.db)

    # -- positions ------------------------------------------------------------------------

    def positions(self) -> dict[str, int]:
        return {name: pos for name, pos in self._live.positions().items() if name in self.projections}

    def rebuilding(self) -> dict[str, int]:
        """Rebuilds started and not yet swapped in: name -> the position their fresh tables reached
        (here, or in a helper's file: parallel.py)."""
        positions = self._rebuilding.positions()
        for name, position in parallel.helper_positions(self).items():
            if name in positions:
                positions[name] = max(positions[name], position)
        return {name: pos for name, pos in positions.items() if name in self.projections}

    def head(self) -> int:
        return self.log.head()

    def status(self) -> list[dict[str, Any]]:
        with self._lock:
            head = self.head()
            live, rebuilding = self.positions(), self.rebuilding()
        return [{"name": name, "position": live.get(name, 0), "head": head, "behind": head - live.get(name, 0),
                 "rebuild_position": rebuilding.get(name)} for name in self.projections]

    # -- catch-up -------------------------------------------------------------------------

    def catch_up(self, names: Iterable[str] | None = None, *, stop: int | None = None) -> int:
        """Apply every committed event not yet applied; returns how many were read.

        A projection whose tables turn out to be damaged is rebuilt from the log once (per
        runner), and the catch-up goes on.
        """
        if self.read_only:
            return 0
        selected = list(names) if names is not None else list(self.projections)
        with self._lock:
            while True:
                try:
                    return self._catch_up(selected, stop)
                except ProjectionCorrupt as e:
                    self.repair(e.name, cause=e)

    def _catch_up(self, selected: list[str], stop: int | None) -> int:
        with cyclic_gc_paused():
            return self._catch_up_all(selected, stop)

    def _catch_up_all(self, selected: list[str], stop: int | None) -> int:
        target = self.head() if stop is None else stop
        applied = 0
        kept: dict[str, tuple[Any, int]] = {}
        while True:
            positions = self._live.positions()
            behind = [n for n in selected if positions.get(n, 0) < target]
            if not behind:
                return applied
            applied += self._pass(self._live, behind, positions, target, kept=kept)

    def repair(self, name: str, *, cause: BaseException | None = None) -> None:
        """Rebuild a damaged projection from the log; once per runner, so damage that a rebuild
        does not cure is reported instead of looping."""
        self._refuse_if_read_only(f"repairing the {name} read model" + (f" ({cause})" if cause else ""))
        if name in self._repaired:
            raise StoreError(f"the {name} read model is still damaged after a rebuild from the log"
                             + (f" ({cause})" if cause else ""))
        self._repaired.add(name)
        with self._lock:
            self._discard_rebuild(name)
            self.rebuild([name])

    def _pass(self, target: _Target, names: list[str], positions: dict[str, int], stop: int,
              batch: int | None = None, kept: dict[str, tuple[Any, int]] | None = None) -> int:
        """Read one batch after the lowest position of `names` and apply it; returns rows read.

        The batch is read, decoded and applied to the writers (which only buffer) before the
        write transaction, so the file is locked only while the buffers are written. Inside the
        transaction the positions are read again: if another process moved one meanwhile, the
        batch is applied afresh from there. `kept` carries writers from one batch to the next of
        the same run (their caches stay valid) while their projection is where they left it.
        """
        kept = {} if kept is None else kept
        limit = batch or self.batch
        start = min(positions.get(n, 0) for n in names)
        projections = [self.projections[n] for n in names]
        topics: tuple[str, ...] = ()
        if all(p.topics for p in projections):
            topics = tuple(sorted({t for p in projections for t in p.topics}))
        rows = self.log.read(start, stop, limit, topics)
        reached = rows[-1][0] if len(rows) == limit else stop
        ahead = {n: positions.get(n, 0) for n in names if positions.get(n, 0) < reached}
        writers = self._writers(target, ahead, kept)
        early = {n: w for n, w in writers.items() if getattr(w, "buffers", False)}
        self._apply(rows, early, ahead, target)
        with target.transaction():
            current = target.positions()
            if any(current.get(n, 0) != ahead[n] for n in ahead):  # another process moved it
                ahead = {n: current[n] for n in ahead if n in current and current[n] < reached}
                writers = early = self._writers(target, ahead, {})
                self._apply(rows, writers, ahead, target)
            else:
                self._apply(rows, {n: w for n, w in writers.items() if n not in early}, ahead, target)
            advanced = {}
            for name, writer in writers.items():
                _guarded(name, writer.flush)
                advanced[name] = min(reached, target.stops.get(name, reached))
                target.advance(name, advanced[name])
        kept.update((name, (writers[name], position)) for name, position in advanced.items())
        return len(rows)

    def _writers(self, target: _Target, ahead: dict[str, int], kept: dict[str, tuple[Any, int]]) -> dict[str, Any]:
        writers = {}
        for name, position in ahead.items():
            writer, left_at = kept.pop(name, (None, -1))
            writers[name] = writer if left_at == position else self.projections[name].writer(target.tables())
        return writers

    def _apply(self, rows: list[Row], writers: dict[str, Any], after: dict[str, int], target: _Target) -> None:
        """Apply each row to the writers whose projection reads its topic and has not seen it.

        Row by row, writers with `apply_fields(topic, fields, position)` get the event's fields
        (`log.fields`: times as text, the cheaper decoding), writers with `apply(event,
        position)` the domain event. Writers with `apply_rows(rows, fields, log)` then get their
        part of the batch at once, raw, with the fields other writers had decoded (`fields[i]`
        for `rows[i]`, or None: `log.fields(row)` if they need it), so that they decode only
        what no other writer did. A writer must not change the fields it is given.
        """
        if not writers or not rows:
            return
        bounds = {n: (after[n], target.stops.get(n, 1 << 62)) for n in writers}
        by_row = {n: w for n, w in writers.items() if not hasattr(w, "apply_rows")}
        by_batch = {n: w for n, w in writers.items() if hasattr(w, "apply_rows")}
        decoded: list[Any] = [None] * len(rows) if by_batch else []
        keep = bool(by_batch)
        fields_of, decode = self.log.fields, self.log.decode
        plan: dict[str, list[tuple[str, int, int, Callable[..., None], bool]]] = {}
        name = ""
        row = None
        try:
            for i, row in enumerate(rows) if by_row else ():
                position, topic = row[0], row[3]
                todo = plan.get(topic)
                if todo is None:
                    todo = plan[topic] = [
                        (n, *bounds[n], getattr(w, "apply_fields", None) or w.apply, hasattr(w, "apply_fields"))
                        for n, w in by_row.items() if self._reads(n, topic)]
                fields = event = None
                for name, low, high, apply, wants_fields in todo:
                    if low < position <= high:
                        if wants_fields:
                            if fields is None:
                                fields = fields_of(row)
                                if keep:
                                    decoded[i] = fields
                            apply(topic, fields, position)
                        else:
                            if event is None:
                                event = decode(row)
                            apply(event, position)
            for name, writer in by_batch.items():
                low, high = bounds[name]
                if low < rows[0][0] and rows[-1][0] <= high and not self.projections[name].topics:
                    writer.apply_rows(rows, decoded, self.log)
                    continue
                mine = [i for i, row in enumerate(rows) if low < row[0] <= high and self._reads(name, row[3])]
                if mine:
                    writer.apply_rows([rows[i] for i in mine], [decoded[i] for i in mine], self.log)
        except sqlite3.DatabaseError as e:
            if is_corruption(e):
                raise ProjectionCorrupt(name, e) from e
            raise
        except Exception as e:  # noqa: BLE001 - an event that cannot be decoded or applied is named
            raise self._unreadable(name, rows if row is None else [row], e) from e

    def _unreadable(self, name: str, rows: Sequence[Row], error: Exception) -> "UnreadableEvent":
        """The event a projection could not take: the first of `rows` that does not decode, else
        (a batch whose events all decode) the batch's first."""
        culprit = rows[0]
        for row in rows:
            try:
                self.log.fields(row)
            except Exception as e:  # noqa: BLE001 - looking for the row that fails
                culprit, error = row, e
                break
        return UnreadableEvent(name, culprit[0], culprit[3], f"{type(error).__name__}: {error}")

    def _reads(self, name: str, topic: str) -> bool:
        topics = self.projections[name].topics
        return not topics or topic in topics

    # -- rebuild --------------------------------------------------------------------------

    def rebuild(self, names: Iterable[str] | None = None, *, progress: Progress | None = None,
                pause: float = 0.0, batch: int | None = None, workers: int | None = None) -> int:
        """Rebuild the named read models (all by default) from the log; returns events covered."""
        return self.run_rebuild(names, progress=progress, pause=pause, batch=batch, workers=workers).events

    def run_rebuild(self, names: Iterable[str] | None = None, *, progress: Progress | None = None,
                    pause: float = 0.0, batch: int | None = None, workers: int | None = None) -> RebuildReport:
        """`batch` events per transaction (default REBUILD_BATCH) and `pause` seconds between
        batches let a live gateway's writes through a long rebuild. `workers` processes share
        the work (parallel.py; by default two for a large rebuild on two cores or more)."""
        self._refuse_if_read_only("a rebuild")
        selected = list(names) if names is not None else list(self.projections)
        report = RebuildReport(projections=selected)
        started = time.perf_counter()
        batch = batch or REBUILD_BATCH
        with self._bulk(), parallel.rebuild_lock(self) as owner:
            if owner:
                self._take_helpers_work(check=True)  # what helpers of a killed rebuild had committed
            report.resumed = self._start_rebuild(selected)
            first = min(self._rebuilding.positions().get(n, 0) for n in selected)
            tell = None if progress is None else self._progress_reporter(selected, first, progress)
            groups = parallel.plan(self, selected, workers if owner else 1, self.head() - first)
            report.workers = len(groups)
            swapped = 0
            with parallel.helpers(self, groups[1:], batch, pause, tell):
                self._fill(self._rebuilding, groups[0], batch, pause, tell)
                if len(groups) > 1:  # its own projections go live while the helpers finish theirs
                    swapped = self._swap(groups[0])
                    self.db.execute("PRAGMA wal_checkpoint(PASSIVE)")  # meanwhile too, not at the end
            if owner:
                self._take_helpers_work(check=False)
            self._fill(self._rebuilding, selected, batch, pause, tell)  # what the log gained meanwhile
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
            target = _Target(self.db, REBUILD_SUFFIX, f"{ELSEWHERE}.{REBUILDS_TABLE}", schema=ELSEWHERE)
            assert target.table is not None  # a rebuild keeps its positions in a table
            with target.transaction():
                _create_rebuilds_table(self.db, target.table)
                started = target.positions()
                for name in names:
                    if name not in started:
                        self.projections[name].create(target.tables())
                        _start_rebuild_at_zero(self.db, target.table, name)
            with self._lock, cyclic_gc_paused():
                self._fill(target, names, batch or REBUILD_BATCH, pause, None)
        finally:
            self.db.execute(f"DETACH DATABASE {ELSEWHERE}")

    def _take_helpers_work(self, *, check: bool) -> None:
        """Copy into this file's fresh tables what helpers filled in theirs, where it is further
        along, with its position (one transaction), then delete the helpers' files. `check`:
        first make sure a file is sound (one a killed rebuild left); a damaged one is dropped."""
        for path in parallel.helper_files(self):
            try:
                self.db.execute("ATTACH DATABASE ? AS " + ELSEWHERE, (path,))
            except sqlite3.DatabaseError:
                parallel.remove_file(path)
                continue
            try:
                sound = not check or self.db.execute(f"PRAGMA {ELSEWHERE}.quick_check").fetchone()[0] == "ok"
                if sound:
                    with self._write():
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
        ours = self._rebuilding.positions()
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
                self._rebuilding.advance(name, position)
            self.db.execute("RELEASE copy")

    @contextmanager
    def _bulk(self) -> Any:
        """How a rebuild writes: this runner to itself, the cyclic collector paused, rare WAL checkpoints."""
        with self._lock, cyclic_gc_paused(), _wal_checkpoints_every(self.db, REBUILD_WAL_PAGES):
            yield

    def _fill(self, target: _Target, names: list[str], batch: int, pause: float,
              tell: Callable[[], None] | None) -> None:
        kept: dict[str, tuple[Any, int]] = {}
        while True:
            head = self.head()
            positions = target.positions()
            behind = [n for n in names if n in positions and positions[n] < head]
            if not behind:
                return
            self._pass(target, behind, positions, head, batch, kept)
            if tell is not None:
                tell()
            if pause:
                time.sleep(pause)

    def _progress_reporter(self, names: list[str], first: int, progress: Progress) -> Callable[[], None]:
        """Reports events done (the mean of the projections' positions) out of events to do,
        each time it changes."""
        last: list[tuple[int, int]] = []

        def tell() -> None:
            head = self.head()
            positions = self.rebuilding()
            reached = [min(positions.get(n, head), head) - first for n in names]
            now = (max(0, round(sum(reached) / len(reached))) if reached else 0, max(head - first, 1))
            if not last or last[0] != now:
                last[:] = [now]
                progress(*now)
        return tell

    def _start_rebuild(self, selected: list[str]) -> dict[str, int]:
        """Create the fresh tables of each projection, or find those a killed rebuild left."""
        resumed = {}
        with self._write():
            existing = self._rebuilding.positions()
            tables = self._table_names()
            for name in selected:
                p = self.projections[name]
                fresh = [t + REBUILD_SUFFIX for t in p.tables]
                if name in existing and all(t in tables for t in fresh):
                    resumed[name] = existing[name]
                    continue
                for table in fresh:
                    self._drop(p, table)
                p.create(Tables(self.db, REBUILD_SUFFIX))
                _start_rebuild_at_zero(self.db, REBUILDS_TABLE, name)
        return {n: pos for n, pos in resumed.items() if pos > 0}

    def _swap(self, selected: list[str]) -> int:
        """Put the fresh tables in place of the live ones, in one transaction; returns the position."""
        reached = 0
        with self._write():
            positions = self._rebuilding.positions()
            for name in selected:
                if name not in positions:
                    continue  # another process finished this rebuild first
                p = self.projections[name]
                for table in p.tables:
                    self._drop(p, table)
                for table in p.tables:
                    self.db.execute(f"ALTER TABLE [{table}{REBUILD_SUFFIX}] RENAME TO [{table}]")
                p.create_indexes(Tables(self.db))
                self.db.execute(f"UPDATE {POSITIONS_TABLE} SET position=? WHERE name=?", (positions[name], name))
                self.db.execute(f"DELETE FROM {REBUILDS_TABLE} WHERE name=?", (name,))
                reached = max(reached, positions[name])
        return reached

    def _discard_rebuild(self, name: str) -> None:
        with self._write():
            p = self.projections[name]
            for table in p.tables:
                self._drop(p, table + REBUILD_SUFFIX)
            self.db.execute(f"DELETE FROM {REBUILDS_TABLE} WHERE name=?", (name,))

    def _drop(self, p: Projection, table: str) -> None:
        """DROP TABLE, even of a virtual table too damaged to open: the projection's `salvage`
        makes it droppable (the log is the copy that matters)."""
        try:
            self.db.execute(f"DROP TABLE IF EXISTS [{table}]")
        except sqlite3.DatabaseError:
            salvage = getattr(p, "salvage", None)
            if salvage is None:
                raise
            salvage(self.db, table)
            self.db.execute(f"DROP TABLE IF EXISTS [{table}]")

    def _table_names(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    # -- a copy for verification ------------------------------------------------------------

    def build_copy(self, db: sqlite3.Connection, stops: dict[str, int]) -> int:
        """Fill the projections named in `stops` into another connection, each up to its stop."""
        target = _Target(db, "", None, stops)
        for name in stops:
            t = Tables(db)
            self.projections[name].create(t)
            target.memory[name] = 0
        applied = 0
        kept: dict[str, tuple[Any, int]] = {}
        with self._lock, cyclic_gc_paused():
            while True:
                behind = [n for n, stop in stops.items() if target.memory[n] < stop]
                if not behind:
                    return applied
                applied += self._pass(target, behind, target.positions(), max(stops[n] for n in behind), kept=kept)

    def close(self) -> None:
        self.log.close()
        self.db.close()


def _create_rebuilds_table(db: sqlite3.Connection, table: str) -> None:
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


def _guarded(name: str, fn: Callable[..., None], *args: Any) -> None:
    try:
        fn(*args)
    except sqlite3.DatabaseError as e:
        if is_corruption(e):
            raise ProjectionCorrupt(name, e) from e
        raise


class _WriteTransaction:
    """BEGIN IMMEDIATE so that concurrent catch-ups in other processes serialise on the file lock
    (`immediate=False`: a deferred BEGIN, which locks only the files written to).

    Re-entrant: a nested use inside an open transaction joins it.
    """

    def __init__(self, db: sqlite3.Connection, immediate: bool = True) -> None:
        self.db = db
        self.immediate = immediate
        self.outer = False

    def __enter__(self) -> sqlite3.Connection:
        if not self.db.in_transaction:
            self.db.execute("BEGIN IMMEDIATE" if self.immediate else "BEGIN")
            self.outer = True
        return self.db

    def __exit__(self, exc_type, exc, tb) -> None:  # type: ignore[no-untyped-def]
        if not self.outer:
            return
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")
