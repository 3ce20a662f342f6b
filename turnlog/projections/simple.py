"""Running a projection written the simple way: `create(db)` and `apply(db, event, position)`.

Such a projection names its tables literally in its SQL. To fill a fresh set of tables for a
rebuild, it is handed a connection that renames its own tables (whole words only) in every
statement: `INSERT INTO route_history` becomes `INSERT INTO route_history__rebuild`. Its
`CREATE INDEX IF NOT EXISTS` statements then find the live index of the same name and do
nothing, so its indexes are only built, under their own names, after the swap.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any, Iterable, Sequence

from .base import Tables


class SimpleProjection:
    """A projection written the simple way, run as the runner runs any other (base.Projection)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.topics: tuple[str, ...] = tuple(inner.topics)
        self.tables: tuple[str, ...] = tuple(inner.tables)
        self._pattern = re.compile(r"(?<![\w\[\"])(" + "|".join(map(re.escape, self.tables)) + r")(?![\w\]\"])")

    def connection(self, t: Tables) -> Any:
        return t.db if not t.suffix else _RenamingConnection(t.db, self._pattern, t.suffix)

    def create(self, t: Tables) -> None:
        self.inner.create(self.connection(t))

    def create_indexes(self, t: Tables) -> None:
        if not t.suffix:
            self.inner.create(t.db)  # CREATE ... IF NOT EXISTS: adds what a rebuild deferred

    def writer(self, t: Tables) -> "_SimpleWriter":
        return _SimpleWriter(self.inner, self.connection(t))


class _SimpleWriter:
    def __init__(self, inner: Any, db: Any) -> None:
        self.inner = inner
        self.db = db

    def apply(self, event: Any, position: int) -> None:
        self.inner.apply(self.db, event, position)

    def flush(self) -> None:
        pass


class _RenamingConnection:
    def __init__(self, db: sqlite3.Connection, pattern: re.Pattern[str], suffix: str) -> None:
        self.db = db
        self.pattern = pattern
        self.suffix = suffix
        self.cache: dict[str, str] = {}

    def _sql(self, sql: str) -> str:
        done = self.cache.get(sql)
        if done is None:
            done = self.cache[sql] = self.pattern.sub(lambda m: m.group(1) + self.suffix, sql)
        return done

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.db.execute(self._sql(sql), params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> sqlite3.Cursor:
        return self.db.executemany(self._sql(sql), rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)
