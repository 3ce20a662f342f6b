"""Keeps every read model caught up with the log from its own tracked position.

One pass reads the notification log once for all projections. Each batch is one write
transaction on the read-model file that applies the events and advances the positions, so a
crash leaves every projection at a position it fully reflects. The position only moves over a
prefix of the log that was read up to the log's maximum id at the start of the pass: on SQLite
and on PostgreSQL (which takes a table lock per insert) that prefix is committed and gap-free.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Iterable, Sequence

from eventsourcing.application import Application

from .base import Projection

BATCH = 1000
POSITIONS_TABLE = "projection_positions"


def connect_views(path: str) -> sqlite3.Connection:
    uri = path.startswith("file:")
    conn = sqlite3.connect(path, uri=uri, timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


class ProjectionRunner:
    def __init__(self, app: Application, views_path: str, projections: Sequence[Projection]) -> None:
        self.app = app
        self.projections = {p.name: p for p in projections}
        self.db = connect_views(views_path)
        self._lock = threading.RLock()
        self._ensure_schema()

    def _ensure_schema(self) -> None:
        with self._lock, self._write():
            self.db.execute(
                f"CREATE TABLE IF NOT EXISTS {POSITIONS_TABLE} (name TEXT PRIMARY KEY, position INTEGER NOT NULL)"
            )
            for p in self.projections.values():
                p.create(self.db)
                self.db.execute(
                    f"INSERT OR IGNORE INTO {POSITIONS_TABLE} (name, position) VALUES (?, 0)", (p.name,)
                )

    def _write(self) -> "_WriteTransaction":
        return _WriteTransaction(self.db)

    def positions(self) -> dict[str, int]:
        rows = self.db.execute(f"SELECT name, position FROM {POSITIONS_TABLE}").fetchall()
        return {name: pos for name, pos in rows if name in self.projections}

    def head(self) -> int:
        return self.app.recorder.max_notification_id() or 0

    def catch_up(self, names: Iterable[str] | None = None, *, stop: int | None = None) -> int:
        """Apply every committed event not yet applied; returns how many were applied."""
        selected = list(names) if names is not None else list(self.projections)
        target = self.head() if stop is None else stop
        applied = 0
        with self._lock:
            while True:
                positions = self.positions()
                behind = [n for n in selected if positions[n] < target]
                if not behind:
                    return applied
                with self._write():
                    positions = self.positions()  # another process may have moved them
                    start = min(positions[n] for n in behind)
                    notifications = self.app.recorder.select_notifications(
                        start, BATCH, stop=target, inclusive_of_start=False
                    )
                    for n in notifications:
                        event = None
                        for name in behind:
                            p = self.projections[name]
                            if n.id <= positions[name] or (p.topics and n.topic not in p.topics):
                                continue
                            if event is None:
                                event = self.app.mapper.to_domain_event(n)
                            p.apply(self.db, event, n.id)
                        applied += 1
                    reached = notifications[-1].id if len(notifications) == BATCH else target
                    for name in behind:
                        if positions[name] < reached:
                            self.db.execute(
                                f"UPDATE {POSITIONS_TABLE} SET position=? WHERE name=?", (reached, name)
                            )

    def rebuild(self, names: Iterable[str] | None = None) -> int:
        """Drop and replay the named read models in one transaction: readers see old or new, never half."""
        selected = list(names) if names is not None else list(self.projections)
        with self._lock, self._write():
            for name in selected:
                p = self.projections[name]
                for table in p.tables:
                    self.db.execute(f"DROP TABLE IF EXISTS [{table}]")
                p.create(self.db)
                self.db.execute(f"UPDATE {POSITIONS_TABLE} SET position=0 WHERE name=?", (name,))
            return self.catch_up(selected)

    def close(self) -> None:
        self.db.close()


class _WriteTransaction:
    """BEGIN IMMEDIATE so that concurrent catch-ups in other processes serialise on the file lock.

    Re-entrant: a nested use inside an open transaction joins it.
    """

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.outer = False

    def __enter__(self) -> sqlite3.Connection:
        if not self.db.in_transaction:
            self.db.execute("BEGIN IMMEDIATE")
            self.outer = True
        return self.db

    def __exit__(self, exc_type, exc, tb) -> None:  # type: ignore[no-untyped-def]
        if not self.outer:
            return
        if exc_type is None:
            self.db.execute("COMMIT")
        else:
            self.db.execute("ROLLBACK")
