"""turnlog's SQLite event recorder: the library's recorder, sealing the hash chain as it writes.

A subclass of eventsourcing's `SQLiteApplicationRecorder` through its documented extension
point (`_insert_events`, selected by the factory's `application_recorder_class`): after the
library inserts the events, the same transaction appends one chain link per event. So an event
and its seal commit together or not at all; nothing is ever left unsealed for a reader to seal
later, which is what let an edit made before the first read pass verification.

`chain_meta.sealed_from` is the first position sealed by its own write transaction. A database
written by an older turnlog (events but no `chain_meta`) has its earlier events sealed by the
first write of this version, as they are at that moment; the verifier reports that range as
"sealed late" instead of hiding it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from typing import Any, Sequence
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteConnection, SQLiteCursor, SQLiteDatastore

from ..domain.chain import GENESIS, as_hex, link, matches, seal_of
from .checkpointer import WRITER_AUTOCHECKPOINT_PAGES, WalCheckpointer, background_checkpoints
from .erased_keys import erased_among, refused, sealing_keys
from ..errors import ChainBroken, ConflictError

CHAIN_TABLES = (
    "CREATE TABLE IF NOT EXISTS chain (position INTEGER PRIMARY KEY, hash BLOB NOT NULL)",  # 16 raw bytes
    "CREATE TABLE IF NOT EXISTS chain_meta (id INTEGER PRIMARY KEY CHECK (id = 1), sealed_from INTEGER NOT NULL)",
)
# The streams an archive took away: a write to one (a process whose cache still holds an
# archived session) fails as a conflict would, instead of starting the stream again half-way.
ARCHIVED_STREAMS = (
    "CREATE TABLE IF NOT EXISTS archived_streams (stream TEXT PRIMARY KEY)",
    "CREATE TRIGGER IF NOT EXISTS archived_streams_refuse BEFORE INSERT ON stored_events"
    " WHEN EXISTS (SELECT 1 FROM archived_streams WHERE stream = NEW.originator_id)"
    " BEGIN SELECT RAISE(ABORT, 'turnlog: this stream was archived'); END",
)
ADOPT_BATCH = 5000
_CHUNK = 500  # ids per IN (...): under SQLite's variable limit


def _chunks(values: Sequence[Any]) -> list[list[Any]]:
    return [list(values[i:i + _CHUNK]) for i in range(0, len(values), _CHUNK)]


def _shortened(head_position: int, first: int) -> ChainBroken:
    return ChainBroken(f"the log was shortened behind turnlog's back: sealed through position {head_position}"
                       f" but the log ends at {first - 1} (run `turnlog verify --chain`)")


class SealingRecorder(SQLiteApplicationRecorder):
    """Writes go through one long-lived connection of this recorder (`use_writer`, set up by the
    factory for a file database), under the recorder's own lock, in the library's transaction
    wrapper (so errors map to its exceptions): no pool hand-out per save, statements stay
    prepared. Reads keep using the library's pool."""

    # Set once chain_meta is known to be committed; until then each write checks (and creates) it.
    _sealed_from: int | None = None

    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name)
        self._write_lock = threading.Lock()
        self._writer: SQLiteConnection | None = None
        self._writer_settings: tuple[str, float, str] | None = None
        self._checkpointer: WalCheckpointer | None = None
        self._writer_conn: sqlite3.Connection | None = None

    def use_writer(self, db_name: str, *, lock_timeout: float, synchronous: str) -> None:
        """Write through a connection of this recorder's own, opened at the first write (opening a
        database only to read it must not create its file)."""
        self._writer_settings = (db_name, lock_timeout, synchronous)

    def _connection(self) -> SQLiteConnection | None:
        if self._writer is None and self._writer_settings is not None:
            db_name, lock_timeout, synchronous = self._writer_settings
            conn = sqlite3.connect(db_name, uri=True, isolation_level=None, check_same_thread=False,
                                   timeout=lock_timeout, cached_statements=64)
            self._writer_conn = conn
            conn.execute(f"PRAGMA synchronous={synchronous}")
            if background_checkpoints():
                conn.execute(f"PRAGMA wal_autocheckpoint={WRITER_AUTOCHECKPOINT_PAGES}")
                self._checkpointer = WalCheckpointer(db_name, lock_timeout=lock_timeout)
            self._writer = SQLiteConnection(conn, max_age=None)
        return self._writer

    def close_writer(self) -> None:
        with self._write_lock:
            self._writer_settings = None
            if self._checkpointer is not None:
                self._checkpointer.close()
                self._checkpointer = None
            if self._writer is not None:
                self._writer.close()
                self._writer = None
                self._writer_conn = None

    def select_events(self, originator_id: UUID | str, *, gt: int | None = None, lte: int | None = None,
                      desc: bool = False, limit: int | None = None) -> Sequence[StoredEvent]:
        """A stream's events, read through the writer's connection once it is open: a connection's
        page cache survives its own commits but is dropped at every other connection's, so a pooled
        reader re-reads the index from the file after each save (the command reads that follow
        a save cost ~5x more that way)."""
        with self._write_lock:
            conn = self._writer_conn
            if conn is not None:
                statement, params = self._select_events_query(originator_id, gt, lte, desc, limit)
                rows = conn.execute(statement, params).fetchall()
                return [StoredEvent(originator_id=self.convert_originator_id(r[0]), originator_version=r[1],
                                    topic=r[2], state=r[3]) for r in rows]
        return super().select_events(originator_id, gt=gt, lte=lte, desc=desc, limit=limit)

    def _select_events_query(self, originator_id: UUID | str, gt: int | None, lte: int | None, desc: bool,
                             limit: int | None) -> tuple[str, list[Any]]:
        statement = (f"SELECT originator_id, originator_version, topic, state FROM {self.events_table_name}"
                     " WHERE originator_id = ?")
        params: list[Any] = [originator_id.hex if isinstance(originator_id, UUID) else originator_id]
        if gt is not None:
            statement += " AND originator_version > ?"
            params.append(gt)
        if lte is not None:
            statement += " AND originator_version <= ?"
            params.append(lte)
        statement += " ORDER BY originator_version DESC" if desc else " ORDER BY originator_version ASC"
        if limit is not None:
            statement += " LIMIT ?"
            params.append(limit)
        return statement, params

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        with self._write_lock:
            writer = self._connection()
            if writer is not None:
                with writer.transaction(commit=True) as c:
                    positions = self._insert_events(c, stored_events, **kwargs)
                if self._checkpointer is not None:
                    self._checkpointer.committed()
                return positions
        return super().insert_events(stored_events, **kwargs)

    def _insert_events(self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        positions = self._append_rows(c, stored_events)
        if not positions:
            return positions
        first = positions[0]
        if self._sealed_from is None:
            for statement in CHAIN_TABLES:
                c.execute(statement)
        head_position, previous = self._head(c)
        if self._sealed_from is None:
            previous = self._start_sealing(c, head_position, previous, first)
        elif head_position >= first:
            raise _shortened(head_position, first)
        rows = []
        for position, s in zip(positions, stored_events):
            previous = seal_of(link(previous, position, s.originator_id, s.originator_version, s.topic, s.state))
            rows.append((position, bytes.fromhex(previous)))
        c.executemany("INSERT INTO chain (position, hash) VALUES (?, ?)", rows)
        if kwargs.get("remove_rows") is not None:
            self._remove(c, kwargs["remove_rows"])
        if kwargs.get("restore_rows") is not None:
            self._restore(c, kwargs["restore_rows"])
        return positions

    def _append_rows(self, c: SQLiteCursor, stored_events: Sequence[StoredEvent]) -> list[int]:
        """Insert the events in one statement and return their positions: under the write lock a
        rowid table gives one statement's rows consecutive rowids, so the last one says them all
        (the library's own insert runs a statement per event to read each rowid). Refused
        (KeyErased) if a data key that sealed them is erased."""
        if not stored_events:
            return []
        c.executemany(self.insert_events_statement,
                      [(s.originator_id.hex if isinstance(s.originator_id, UUID) else s.originator_id,
                        s.originator_version, s.topic, s.state) for s in stored_events])
        key_ids = sealing_keys(stored_events)
        if not key_ids:
            c.execute("SELECT last_insert_rowid()")
            last = int(c.fetchone()[0])
        else:  # after the insert, the write lock held: is a key that sealed them erased (erased_keys.py)?
            c.execute(f"SELECT last_insert_rowid(), {erased_among(key_ids)}", key_ids)
            last, erased = c.fetchone()
            if erased:
                raise refused(key_ids)
        return list(range(last - len(stored_events) + 1, last + 1))

    # -- archiving: rows leave the log, or come back, in the transaction of the event that says so --

    def _remove(self, c: SQLiteCursor, rows: Sequence[tuple[int, str]]) -> None:
        """Delete these (position, stream) rows and the streams' snapshots; refused (ConflictError,
        the transaction rolls back) when the streams hold any other row: a write since they were read."""
        streams = sorted({stream for _, stream in rows})
        held = 0
        for part in _chunks(streams):
            c.execute(f"SELECT count(*) FROM {self.events_table_name} WHERE originator_id IN"
                      f" ({','.join('?' * len(part))})", part)
            held += c.fetchone()[0]
        if held != len(rows):
            raise ConflictError(f"the archived sessions changed while they were archived ({held} events now,"
                                f" {len(rows)} archived): nothing was removed; run it again")
        for part in _chunks([position for position, _ in rows]):
            c.execute(f"DELETE FROM {self.events_table_name} WHERE rowid IN ({','.join('?' * len(part))})", part)
        for part in _chunks(streams):
            c.execute(f"DELETE FROM stored_snapshots WHERE originator_id IN ({','.join('?' * len(part))})", part)
        for statement in ARCHIVED_STREAMS:
            c.execute(statement)
        c.executemany("INSERT OR IGNORE INTO archived_streams (stream) VALUES (?)", [(s,) for s in streams])

    def _restore(self, c: SQLiteCursor, rows: Sequence[tuple[int, str, int, str, bytes]]) -> None:
        """Put archived rows back at their positions, each checked against its seal (the chain
        kept them): rows that do not match what was sealed are refused (ChainBroken)."""
        c.execute("SELECT position, hash FROM chain WHERE position IN (SELECT value FROM json_each(?))",
                  (json.dumps(sorted({p for r in rows for p in (r[0], r[0] - 1)})),))
        seals = {position: as_hex(h) for position, h in c.fetchall()}
        for position, stream, version, topic, state in rows:
            previous = GENESIS if position == 1 else seals.get(position - 1)
            sealed = seals.get(position)
            if previous is None or sealed is None or not matches(
                    link(previous, position, self.convert_originator_id(stream), version, topic, state), sealed):
                raise ChainBroken(f"the archived event at position {position} is not the one the log sealed there:"
                                  " nothing was restored")
        c.execute("SELECT name FROM sqlite_master WHERE name='archived_streams'")
        if c.fetchone() is not None:
            c.executemany("DELETE FROM archived_streams WHERE stream=?", sorted({(r[1],) for r in rows}))
        c.executemany(f"INSERT INTO {self.events_table_name} (rowid, originator_id, originator_version, topic, state)"
                      " VALUES (?, ?, ?, ?, ?)", rows)

    @staticmethod
    def _head(c: SQLiteCursor) -> tuple[int, str]:
        c.execute("SELECT position, hash FROM chain ORDER BY position DESC LIMIT 1")
        row = c.fetchone()
        return (row[0], as_hex(row[1])) if row else (0, GENESIS)

    def _start_sealing(self, c: SQLiteCursor, head_position: int, previous: str, first: int) -> str:
        """First write of this recorder: learn where sealing on write began, or begin it here."""
        c.execute("SELECT sealed_from FROM chain_meta WHERE id = 1")
        row = c.fetchone()
        if row is not None:
            self._sealed_from = row[0]
            if head_position >= first:
                raise _shortened(head_position, first)
            return previous
        # A log written before sealing on write: seal its unsealed events as they are now.
        while head_position < first - 1:
            c.execute(f"SELECT rowid, originator_id, originator_version, topic, state FROM {self.events_table_name}"
                      " WHERE rowid > ? AND rowid < ? ORDER BY rowid LIMIT ?", (head_position, first, ADOPT_BATCH))
            batch = c.fetchall()
            if not batch:
                break
            rows = []
            for position, originator_id, version, topic, state in batch:
                previous = seal_of(link(previous, position, self.convert_originator_id(originator_id), version, topic,
                                            state))
                rows.append((position, bytes.fromhex(previous)))
            c.executemany("INSERT INTO chain (position, hash) VALUES (?, ?)", rows)
            head_position = batch[-1][0]
        c.execute("INSERT INTO chain_meta (id, sealed_from) VALUES (1, ?)", (first,))
        return previous

    # -- reading the chain (verification) ------------------------------------------------------

    def chain_state(self) -> tuple[dict[int, str], int | None]:
        """Every stored seal by position (hex), and the first position sealed on write (None: never)."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT name FROM sqlite_master WHERE type='table' AND name IN ('chain', 'chain_meta')")
            tables = {row[0] for row in c.fetchall()}
            sealed: dict[int, str] = {}
            if "chain" in tables:
                c.execute("SELECT position, hash FROM chain")
                sealed = {row[0]: as_hex(row[1]) for row in c.fetchall()}
            sealed_from = None
            if "chain_meta" in tables:
                c.execute("SELECT sealed_from FROM chain_meta WHERE id = 1")
                row = c.fetchone()
                sealed_from = row[0] if row else None
            return sealed, sealed_from

    def seals(self, positions: Sequence[int]) -> dict[int, str]:
        """The stored seals (hex) of these positions."""
        out: dict[int, str] = {}
        with self.datastore.transaction(commit=False) as c:
            for part in _chunks(sorted(positions)):
                c.execute(f"SELECT position, hash FROM chain WHERE position IN ({','.join('?' * len(part))})", part)
                out.update((row[0], as_hex(row[1])) for row in c.fetchall())
        return out
