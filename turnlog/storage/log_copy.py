"""Copying a log to another store (SQLite <-> PostgreSQL) with its positions and hash chain.

The stored events are copied as they are stored (the same bytes, the same positions, gaps
included), so the chain recomputed on the target covers exactly what it covered on the source.
Each batch is one write transaction on the target, which first checks that the target's head
is still where the copy left it: a copy killed at any moment leaves a whole prefix of the
log, and a second run goes on from the target's head (after checking that the event there is
the source's own), never writing an event twice.

On an SQLite target the batch's chain links are written in the same transaction, as turnlog's
recorder would seal them (storage/recorder.py); a PostgreSQL log is sealed after the fact by
its readers (storage/chain.py), as every PostgreSQL log is.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import Notification
from eventsourcing.sqlite import SQLiteApplicationRecorder

from ..domain.chain import GENESIS, as_hex, link, seal_of
from ..errors import StoreError
from .recorder import CHAIN_TABLES

BATCH = 2000
Progress = Callable[[int, int], None]
Event = tuple[int, Any, int, str, bytes]


@dataclass(frozen=True)
class CopyReport:
    """A log copied to `target`: `copied` events by this run (after `resumed_from`, the target's
    head when it began: 0 for a fresh copy), the target's `events` through `head` compared one by
    one with the source's, its hash chain verified (`chain_ok`), `read_models` rebuilt there."""
    source: str
    target: str
    copied: int
    resumed_from: int
    events: int
    head: int
    chain_ok: bool
    read_models: list[str]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def copy_events(source: Application, target: Application, *, stop: int, batch: int = BATCH,
                progress: Progress | None = None) -> tuple[int, int]:
    """Copy the source's events through position `stop` to `target`, after the target's head;
    returns where the target's head was when this began, and how many events were copied."""
    writer = _writer(target)
    try:
        start = resumed_from = writer.head()
        copied = 0
        if start:
            _refuse_unless_same(source, target, start)
        if start > stop:
            raise StoreError(f"the target's log goes on past the source's (position {start} > {stop}):"
                             " it is not a copy of this log")
        while start < stop:
            # no more events than positions left: a batch past SQLite's integers binds as one
            events = source.recorder.select_notifications(start, min(batch, stop - start), stop=stop,
                                                          inclusive_of_start=False)
            if not events:
                break
            writer.write(events, start)
            start = events[-1].id
            copied += len(events)
            if progress is not None:
                progress(start - resumed_from, stop - resumed_from)
        return resumed_from, copied
    finally:
        writer.close()


def compare(source: Application, target: Application, *, stop: int) -> int:
    """Read both logs through `stop` side by side; the number of events, or StoreError naming the
    first position where they differ."""
    start = count = 0
    while start < stop:
        mine = source.recorder.select_notifications(start, BATCH, stop=stop, inclusive_of_start=False)
        theirs = target.recorder.select_notifications(start, BATCH, stop=stop, inclusive_of_start=False)
        for a, b in zip(mine, theirs):
            if _event(a) != _event(b):
                raise StoreError(f"the copy differs from the source at position {min(a.id, b.id)}")
        if len(mine) != len(theirs):
            shorter = min(len(mine), len(theirs))
            where = (mine if len(mine) > shorter else theirs)[shorter].id
            raise StoreError(f"the copy differs from the source at position {where} (an event missing)")
        if not mine:
            break
        count += len(mine)
        start = mine[-1].id
    return count


def _event(n: Notification) -> Event:
    return n.id, str(n.originator_id), n.originator_version, n.topic, bytes(n.state)


def _refuse_unless_same(source: Application, target: Application, position: int) -> None:
    theirs = target.recorder.select_notifications(position, 1, stop=position)
    mine = source.recorder.select_notifications(position, 1, stop=position)
    if not mine or not theirs or _event(mine[0]) != _event(theirs[0]):
        raise StoreError(f"the target already holds a log that is not this one (its event at position {position}"
                         " differs): copy to an empty database")


class _Writer:
    def head(self) -> int:
        raise NotImplementedError

    def write(self, batch: Sequence[Notification], head: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _writer(target: Application) -> _Writer:
    recorder = target.recorder
    if isinstance(recorder, SQLiteApplicationRecorder):
        return _SqliteWriter(recorder)
    # Imported here: the driver loads only for a PostgreSQL log.
    from eventsourcing.postgres import PostgresApplicationRecorder

    if isinstance(recorder, PostgresApplicationRecorder):
        return _PostgresWriter(recorder)
    raise StoreError(f"cannot copy into a store of {type(recorder).__name__}")


def _moved(head: int, now: int) -> StoreError:
    return StoreError(f"the target was written by another process during the copy (its head moved from {head}"
                      f" to {now}): copy into a database nothing else uses")


class _SqliteWriter(_Writer):
    def __init__(self, recorder: SQLiteApplicationRecorder) -> None:
        db_name = recorder.datastore.pool.db_name
        self.table = recorder.events_table_name
        self.uuid_ids = recorder.datastore.originator_id_type == "uuid"
        self.conn = sqlite3.connect(db_name, uri=db_name.startswith("file:"), isolation_level=None, timeout=30)
        for statement in CHAIN_TABLES:
            self.conn.execute(statement)

    def head(self) -> int:
        return int(self.conn.execute(f"SELECT coalesce(max(rowid), 0) FROM {self.table}").fetchone()[0])

    def write(self, batch: Sequence[Notification], head: int) -> None:
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            now = self.head()
            if now != head:
                raise _moved(head, now)
            row = c.execute("SELECT hash FROM chain ORDER BY position DESC LIMIT 1").fetchone()
            previous = as_hex(row[0]) if row else GENESIS
            events, seals = [], []
            for n in batch:
                stored_id = n.originator_id.hex if self.uuid_ids and isinstance(n.originator_id, UUID) \
                    else str(n.originator_id)
                events.append((n.id, stored_id, n.originator_version, n.topic, n.state))
                previous = seal_of(link(previous, n.id, n.originator_id, n.originator_version, n.topic, n.state))
                seals.append((n.id, bytes.fromhex(previous)))
            c.executemany(f"INSERT INTO {self.table} (rowid, originator_id, originator_version, topic, state)"
                          " VALUES (?, ?, ?, ?, ?)", events)
            c.executemany("INSERT INTO chain (position, hash) VALUES (?, ?)", seals)
            # Sealed on write from the first event: the recorder of a later writer goes on from here.
            c.execute("INSERT OR IGNORE INTO chain_meta (id, sealed_from) VALUES (1, 1)")
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:  # not when an interrupt came just after the COMMIT
                c.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.conn.close()


class _PostgresWriter(_Writer):
    def __init__(self, recorder: Any) -> None:
        from psycopg.sql import SQL, Identifier, Literal

        self.datastore = recorder.datastore
        table = Identifier(self.datastore.schema, recorder.events_table_name)
        self.lock = SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(table)
        self.max = SQL("SELECT max(notification_id) AS head FROM {}").format(table)
        self.insert = SQL("INSERT INTO {} (originator_id, originator_version, topic, state, notification_id)"
                          " VALUES (%s, %s, %s, %s, %s)").format(table)
        # The position sequence goes on after the copied positions, for the gateways' next writes.
        self.advance = SQL("SELECT setval(pg_get_serial_sequence({}, 'notification_id'), %s)").format(
            Literal(f'"{self.datastore.schema}"."{recorder.events_table_name}"'))

    def _head(self, cursor: Any) -> int:
        cursor.execute(self.max)
        row = cursor.fetchone()
        value = row["head"] if isinstance(row, dict) else row[0]
        return int(value or 0)

    def head(self) -> int:
        with self.datastore.transaction(commit=False) as cursor:
            return self._head(cursor)

    def write(self, batch: Sequence[Notification], head: int) -> None:
        with self.datastore.transaction(commit=True) as cursor:
            cursor.execute(self.lock)
            now = self._head(cursor)
            if now != head:
                raise _moved(head, now)
            cursor.executemany(self.insert, [(n.originator_id, n.originator_version, n.topic, n.state, n.id)
                                             for n in batch])
            cursor.execute(self.advance, (batch[-1].id,))
