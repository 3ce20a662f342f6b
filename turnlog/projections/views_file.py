"""The read-model file: opening it, what counts as damage in it, its write transactions, and
where a catch-up or rebuild pass writes in it (`Target`)."""

from __future__ import annotations

import logging
import re
import sqlite3
import time

from .base import Tables

LOCK_TIMEOUT_S = 30  # how long a write to the read models waits for another process's
# A checkpoint another connection is running (this process's checkpointer thread, say) makes a
# truncating one give up at once, without waiting: it is tried again for up to this long.
TRUNCATE_RETRY_S = 2.0
_log = logging.getLogger(__name__)


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


def scrub(conn: sqlite3.Connection) -> None:
    """Zero every page on the file's free list, then checkpoint and truncate the write-ahead log:
    pages freed by earlier deletes and drops (secure_delete=FAST leaves them as they were) and
    the log's old frames may hold the words of rows deleted since. The free pages are taken by
    rows of zeros and freed again with secure_delete on, so the file keeps its size (no VACUUM,
    which would rewrite it under a replicating tool)."""
    conn.execute("PRAGMA secure_delete=ON")
    try:
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        if free:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("CREATE TABLE turnlog_scrub (b BLOB)")
                conn.executemany("INSERT INTO turnlog_scrub VALUES (zeroblob(?))", [(page // 2,)] * (2 * free + 8))
                conn.execute("DROP TABLE turnlog_scrub")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
    finally:
        conn.execute("PRAGMA secure_delete=FAST")
    if not truncate_wal(conn):
        _log.warning("the write-ahead log could not be truncated (a reader holds an old snapshot): its old"
                     " frames may hold deleted words until the next checkpoint reuses them")


def truncate_wal(conn: sqlite3.Connection) -> bool:
    """Checkpoint the whole write-ahead log and truncate it; False when it could not be done."""
    deadline = time.monotonic() + TRUNCATE_RETRY_S
    while True:
        if conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


def is_corruption(error: BaseException) -> bool:
    """An SQLite error that says a table or index holds damaged data (not a lock, not a bug)."""
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    name = getattr(error, "sqlite_errorname", "") or ""
    return name.startswith("SQLITE_CORRUPT") or name == "SQLITE_NOTADB" or bool(
        re.search(r"malformed|corrupt|invalid fts5|vtable constructor failed", str(error), re.IGNORECASE))



class Target:
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

    def transaction(self) -> "WriteTransaction":
        # Writing only to an attached file: a deferred BEGIN locks that file alone.
        return WriteTransaction(self.db, immediate=not self.schema)

    def positions(self) -> dict[str, int]:
        if self.table is None:
            return dict(self.memory)
        return dict(self.db.execute(f"SELECT name, position FROM {self.table}").fetchall())

    def advance(self, name: str, position: int) -> None:
        if self.table is None:
            self.memory[name] = position
        else:
            self.db.execute(f"UPDATE {self.table} SET position=? WHERE name=?", (position, name))



class WriteTransaction:
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
