"""Keeps every read model caught up with the log from its own tracked position.

Catch-up reads the log once for all projections that are behind, in batches. A batch is read,
decoded and applied to the projections' writers (which buffer) first; one write transaction on
the read-model file then writes the buffers and advances the positions, so a crash leaves every
projection at a position it fully reflects, and the file is locked only while rows are written.

A position only moves over a committed, gap-free prefix of the log: the batch is read up to the
log's maximum position taken at the start of the pass (`target`). On SQLite a position is
assigned inside the single writer's transaction, so every position below a committed maximum is
committed too; PostgreSQL takes a table lock per insert to the same effect.

Rebuilding a read model into fresh tables and swapping them in is rebuild.py's; this runner
offers it its pass (`run_pass`) and keeps `run_rebuild`, `fill_elsewhere` and `build_copy` for
callers, and repairs a damaged read model with it.

Speed (see benchmarks/bench_search.py): writers fold a batch's changes to a row into one write
and insert with executemany; writers and their caches live from batch to batch while nothing
else moves their projection; Python's cyclic GC is paused during a pass; the SQLite log is read
with one plain SELECT per batch and decoded without the library mapper's per-row overhead; a
writer that takes a batch of raw rows decodes only what no other writer did.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

from eventsourcing.application import Application

from ..domain.archive import LOG_RESHAPING_TOPICS
from ..domain.erasure import SubjectErased
from ..errors import ProjectionCorrupt, ReadOnlyDatabase, StoreError, UnreadableEvent
from ..gc_pause import cyclic_gc_paused
from .base import POSITIONS_TABLE, REBUILD_SUFFIX, REBUILDS_TABLE, Projection, Tables
from .rebuild import Progress, Rebuild, RebuildReport, create_rebuilds_table
from .simple import SimpleProjection
from .views_file import scrub, LOCK_TIMEOUT_S, Target, WriteTransaction, connect_views, is_corruption
from ..storage.backend import Backend
from ..storage.log import LogReader, Row

BATCH = 5000
# The events after which a catch-up refills every read model from the log instead of applying them.
REFILLED_AFTER = (*LOG_RESHAPING_TOPICS, SubjectErased.TOPIC)
VERSIONS_TABLE = "projection_versions"  # a projection with a `version` is refilled when it changes


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
        self._live = Target(self.db, "", POSITIONS_TABLE)
        self._rebuild = Rebuild(self)
        # What the owner forgets before a refill after REFILLED_AFTER (api.Turnlog: its keys and caches).
        self.before_refill: Callable[[], object] = lambda: None
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
            tables = self.table_names()
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
        with self.write():
            self.db.execute(
                f"CREATE TABLE IF NOT EXISTS {POSITIONS_TABLE} (name TEXT PRIMARY KEY, position INTEGER NOT NULL)")
            create_rebuilds_table(self.db, REBUILDS_TABLE)
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
            self.drop_table(p, table)
        for table in p.tables:
            self.drop_table(p, table)
            self.drop_table(p, table + REBUILD_SUFFIX)
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

    def refuse_if_read_only(self, what: str) -> None:
        """Raise ReadOnlyDatabase, naming `what`, if this runner may not write."""
        if self.read_only:
            raise ReadOnlyDatabase(f"{what} needs to write, and {self.views_path} is open read-only")

    def write(self) -> "WriteTransaction":
        """A write transaction on the read-model file (re-entrant: a nested one joins it)."""
        return WriteTransaction(self.db)

    # -- positions ------------------------------------------------------------------------

    def positions(self) -> dict[str, int]:
        return {name: pos for name, pos in self._live.positions().items() if name in self.projections}

    def rebuilding(self) -> dict[str, int]:
        """Rebuilds started and not yet swapped in: name -> the position their fresh tables reached
        (here, or in a helper's file: parallel.py)."""
        return self._rebuild.positions()

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
        reshaped = stop is not None  # a bounded catch-up (a copy as of a moment) never refills
        while True:
            positions = self._live.positions()
            behind = [n for n in selected if positions.get(n, 0) < target]
            if not behind:
                return applied
            if not reshaped:
                reshaped = True
                if self.log.read(min(positions.get(n, 0) for n in behind), target, 1, REFILLED_AFTER):
                    # An archive took rows out of the log, or a restore put them back behind every
                    # read model's position, or another process erased a subject whose words these
                    # read models hold: refill them all from the log (blue/green) instead, with what
                    # this process holds in memory forgotten first, and zero the freed pages.
                    self.before_refill()
                    for name in self.projections:
                        self._rebuild.discard(name)
                    applied += self.rebuild()
                    self.scrub()
                    kept.clear()
                    continue
            applied += self.run_pass(self._live, behind, positions, target, kept=kept)

    def repair(self, name: str, *, cause: BaseException | None = None) -> None:
        """Rebuild a damaged projection from the log; once per runner, so damage that a rebuild
        does not cure is reported instead of looping."""
        self.refuse_if_read_only(f"repairing the {name} read model" + (f" ({cause})" if cause else ""))
        if name in self._repaired:
            raise StoreError(f"the {name} read model is still damaged after a rebuild from the log"
                             + (f" ({cause})" if cause else ""))
        self._repaired.add(name)
        with self._lock:
            self._rebuild.discard(name)
            self.rebuild([name])

    def run_pass(self, target: Target, names: list[str], positions: dict[str, int], stop: int,
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

    def _writers(self, target: Target, ahead: dict[str, int], kept: dict[str, tuple[Any, int]]) -> dict[str, Any]:
        writers = {}
        for name, position in ahead.items():
            writer, left_at = kept.pop(name, (None, -1))
            writers[name] = writer if left_at == position else self.projections[name].writer(target.tables())
        return writers

    def _apply(self, rows: list[Row], writers: dict[str, Any], after: dict[str, int], target: Target) -> None:
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
        return self._rebuild.run(names, progress=progress, pause=pause, batch=batch, workers=workers)

    def fill_elsewhere(self, names: list[str], path: str, *, batch: int | None = None, pause: float = 0.0) -> None:
        """A rebuild helper's part (rebuild.py): fill fresh tables of `names` in the file at `path`."""
        self._rebuild.fill_elsewhere(names, path, batch=batch, pause=pause)

    def opened_again(self) -> "ProjectionRunner":
        """A runner of its own on the same log and read models (a forked rebuild helper's: it
        must not use its parent's connections)."""
        return type(self)(self.app, self.views_path, list(self.projections.values()), backend=self.backend)

    def drop_table(self, p: Projection, table: str) -> None:
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

    def read_model_tables(self) -> list[str]:
        """Every table the read models own (their fresh tables of a rebuild and their positions
        included): what the log alone gives back."""
        owned = [t + suffix for p in self.projections.values() for t in p.tables for suffix in ("", REBUILD_SUFFIX)]
        return [*owned, POSITIONS_TABLE, REBUILDS_TABLE, VERSIONS_TABLE]

    def table_names(self) -> set[str]:
        """The tables in the read-model file."""
        return {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    # -- a copy for verification ------------------------------------------------------------

    def build_copy(self, db: sqlite3.Connection, stops: dict[str, int]) -> int:
        """Fill the projections named in `stops` into another connection, each up to its stop."""
        return self._rebuild.build_copy(db, stops)

    def scrub(self) -> None:
        """Leave no copy of deleted rows in the file (after an erase): views_file.scrub."""
        scrub(self.db)

    def close(self) -> None:
        self.log.close()
        self.db.close()


def _guarded(name: str, fn: Callable[..., None], *args: Any) -> None:
    try:
        fn(*args)
    except sqlite3.DatabaseError as e:
        if is_corruption(e):
            raise ProjectionCorrupt(name, e) from e
        raise

