"""What a read model is: tables it owns, the events it reads, and how a batch of events changes it.

A projection names its tables once (`tables`) and writes every SQL statement with `{table}`
placeholders, so that the same code fills the live tables or a fresh set (`routes__rebuild`, ...)
that a rebuild swaps in. A writer buffers a batch's changes (`Rows`, lists of inserts) and writes
them all in `flush()`, at the end of the batch's write transaction. The runner hands the same
writer the next batch only if nothing else changed the projection meanwhile, so a writer may
keep caches of what it wrote (a stream's filing, a session's key) from one batch to the next.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import warnings
from operator import itemgetter
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence


_PLAIN = frozenset({str, int, float, bool, type(None)})


class TypedRow:
    """A read-model row as a dataclass (the views' results): read its fields as attributes;
    `to_dict()` gives them as a plain dict (what JSON output shows).

    The public API returned these rows as dicts before; reading one by key (`row["field"]`,
    `row.get`, `row.keys()`, `**row`), iterating it (its keys), `len(row)` and comparing it with a
    dict still work for one release, as the dict did, with a DeprecationWarning. Two rows compare
    as dataclasses do (the same class and fields), without a warning."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # @dataclass adds its own __eq__ only where the class has none: this one is its equality
        # between two rows, plus the old dict's with a dict (its __hash__ is still made).
        if "__eq__" not in cls.__dict__:
            setattr(cls, "__eq__", _row_eq)

    def to_dict(self) -> dict[str, Any]:
        # dataclasses.asdict, without its per-value deep copy where a value is plain (most are):
        # a listing of sessions spent most of its time there.
        names = _field_names(type(self))
        out = {name: getattr(self, name) for name in names}
        for name, value in out.items():
            if type(value) not in _PLAIN:
                out[name] = _plain_copy(value)
        return out


    def __getitem__(self, name: str) -> Any:
        _read_as_dict(self)
        if name not in _field_names(type(self)):
            raise KeyError(name)
        return getattr(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        _read_as_dict(self)
        return getattr(self, name) if name in _field_names(type(self)) else default

    def keys(self) -> tuple[str, ...]:
        _read_as_dict(self)
        return _field_names(type(self))

    def items(self) -> list[tuple[str, Any]]:
        _read_as_dict(self)
        return list(self.to_dict().items())

    def __contains__(self, name: object) -> bool:
        _read_as_dict(self)
        return name in _field_names(type(self))

    def __iter__(self) -> Iterator[str]:
        _read_as_dict(self)
        return iter(_field_names(type(self)))

    def __len__(self) -> int:
        _read_as_dict(self)
        return len(_field_names(type(self)))

    def __bool__(self) -> bool:  # a row is there (as a dict of its fields was never empty): no len() read
        return True


def _row_eq(self: TypedRow, other: object) -> bool:
    if other.__class__ is self.__class__:  # dataclass equality: the compared fields, in order
        names = _compared_names(type(self))
        return all(getattr(self, n) == getattr(other, n) for n in names)
    if isinstance(other, dict):
        _read_as_dict(self)
        return self.to_dict() == other
    return NotImplemented


def _read_as_dict(row: TypedRow) -> None:
    warnings.warn(f"reading a {type(row).__name__} as a dict is deprecated and goes in the next release:"
                  " read its attributes, or call to_dict()", DeprecationWarning, stacklevel=3)


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _compared_names(cls: type) -> tuple[str, ...]:
    names = _COMPARED_NAMES.get(cls)
    if names is None:
        names = _COMPARED_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.compare)
    return names


_COMPARED_NAMES: dict[type, tuple[str, ...]] = {}


def _plain_copy(value: Any) -> Any:
    """What dataclasses.asdict makes of a field's value."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return dataclasses.asdict(_Box(value))["value"]


@dataclasses.dataclass
class _Box:
    value: Any


POSITIONS_TABLE = "projection_positions"  # name -> the position a live read model reflects
REBUILDS_TABLE = "projection_rebuilds"  # rebuilds under way: name -> the position their fresh tables reached
REBUILD_SUFFIX = "__rebuild"  # a rebuild's fresh tables: `<table>__rebuild`, swapped in when done


class Writer(Protocol):
    # or apply_fields(topic, fields, position), or apply_rows(rows, fields, log): runner.py
    def apply(self, event: Any, position: int) -> None: ...

    def flush(self) -> None: ...


class Projection(Protocol):
    name: str
    topics: tuple[str, ...]  # the event topics it reads; others are skipped cheaply; () reads all
    tables: tuple[str, ...]  # the tables it owns, dropped and rebuilt together (virtual tables first)
    # Optional `version: int`: when it changes, the tables are dropped and refilled from the log,
    # and optional `retired: tuple[str, ...]`, tables earlier versions owned, are dropped.

    def create(self, t: "Tables") -> None: ...  # the tables (IF NOT EXISTS), without secondary indexes

    def create_indexes(self, t: "Tables") -> None: ...  # secondary indexes: a rebuild adds them at the end

    def writer(self, t: "Tables") -> Writer: ...


def topic_of(event: Any) -> str:
    return type(event).TOPIC


def event_name(topic: str) -> str:
    return topic.split(":", 1)[-1]


class Tables(dict):  # type: ignore[type-arg]
    """Actual table names of one set of a projection's tables: t["routes"] -> "routes__rebuild"
    (or "helper.routes__rebuild" in an attached database `helper`).

    `t.sql("UPDATE {routes} SET ...")` fills the placeholders (cached per statement).
    """

    def __init__(self, db: sqlite3.Connection, suffix: str = "", schema: str = "") -> None:
        super().__init__()
        self.db = db
        self.suffix = suffix
        self.schema = schema
        self._sql: dict[str, str] = {}

    def __missing__(self, name: str) -> str:
        return f"{self.schema}.{name}{self.suffix}" if self.schema else f"{name}{self.suffix}"

    def sql(self, text: str) -> str:
        done = self._sql.get(text)
        if done is None:
            done = self._sql[text] = text.format_map(self)
        return done

    def execute(self, text: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.db.execute(self.sql(text), params)

    def executemany(self, text: str, rows: Iterable[Sequence[Any]]) -> None:
        self.db.executemany(self.sql(text), rows)


class Rows:
    """The rows of one table that a write transaction touches, changed in memory, written once.

    `new(key, **values)` adds a row; `get(key)` returns the row to change in place (read from
    the table on first use). `flush()` inserts the new rows and updates the changed ones with one
    executemany each, so a delivery recorded, attempted and delivered in one batch is one INSERT.
    Written rows stay cached (up to CACHED) for the next batches of the same writer, which the
    runner gives them only while nothing else has changed the table. `key` names the key
    column, or a tuple of columns (then keys are tuples).
    """

    CACHED = 20_000

    def __init__(self, t: Tables, table: str, columns: Sequence[str], key: str | tuple[str, ...]) -> None:
        self.t = t
        self.columns = tuple(columns)
        self.key_columns = (key,) if isinstance(key, str) else tuple(key)
        self.composite = not isinstance(key, str)
        name = t[table]
        cols = ", ".join(self.columns)
        match = " AND ".join(f"{k}=?" for k in self.key_columns)
        self._select = f"SELECT {cols} FROM {name} WHERE {match}"
        self._insert = f"INSERT INTO {name} ({cols}) VALUES ({', '.join('?' * len(self.columns))})"
        others = [c for c in self.columns if c not in self.key_columns]
        self._update = f"UPDATE {name} SET {', '.join(f'{c}=?' for c in others)} WHERE {match}"
        self._insert_values = _values(self.columns)
        self._update_values = _values((*others, *self.key_columns))
        self._delete = f"DELETE FROM {name} WHERE {match}"
        self._blank = dict.fromkeys(self.columns)
        self.added: dict[Any, dict[str, Any]] = {}
        self.removed: set[Any] = set()  # keys of stored rows to delete at flush
        self.loaded: dict[Any, dict[str, Any]] = {}
        self.clean: dict[Any, dict[str, Any]] = {}  # written, unchanged since

    def _key_values(self, key: Any) -> tuple[Any, ...]:
        return tuple(key) if self.composite else (key,)

    def new(self, key: Any, **values: Any) -> dict[str, Any]:
        row = self._blank.copy()
        row.update(values)
        row.update(zip(self.key_columns, self._key_values(key)))
        self.added[key] = row
        return row

    def get(self, key: Any) -> dict[str, Any] | None:
        row = self.added.get(key) or self.loaded.get(key)
        if row is None and key in self.removed:
            return None
        if row is None:
            row = self.clean.pop(key, None)
            if row is None:
                found = self.t.db.execute(self._select, self._key_values(key)).fetchone()
                if found is None:
                    return None
                row = dict(zip(self.columns, found))
            self.loaded[key] = row
        return row

    def remove(self, key: Any) -> None:
        """Forget a row: a row added in this batch is never written, a stored one is deleted."""
        if self.added.pop(key, None) is None:
            self.removed.add(key)
        self.loaded.pop(key, None)
        self.clean.pop(key, None)

    def flush(self) -> None:
        if self.removed:
            self.t.db.executemany(self._delete, map(self._key_values, self.removed))
            self.removed = set()
        if self.added:
            self.t.db.executemany(self._insert, map(self._insert_values, self.added.values()))
        if self.loaded:
            self.t.db.executemany(self._update, map(self._update_values, self.loaded.values()))
        clean = self.clean
        clean.update(self.added)
        clean.update(self.loaded)
        self.added, self.loaded = {}, {}
        while len(clean) > self.CACHED:
            del clean[next(iter(clean))]


def _values(columns: Sequence[str]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """A row dict's values in `columns` order, as a tuple."""
    if len(columns) == 1:
        only = columns[0]
        return lambda row: (row[only],)
    return itemgetter(*columns)
