"""What an SQLite file is, decided before turnlog writes a byte to it.

A turnlog database is identified positively: it carries a `turnlog_meta` table with its format
and format version, written when turnlog creates the file. A file made by an earlier turnlog
(no marker) is adopted when it has turnlog's own tables and columns (`stored_events` with the
library's columns holding only turnlog events, and `projection_positions`); opened for writing,
it then gets the marker. Anything else — a directory, an empty file, a file that is not SQLite,
an SQLite file of another program (even another eventsourcing app's `stored_events`) — is
refused with one line, read only through a read-only connection that cannot write.

A new database is made whole in a temporary file beside the target and linked into place, so
a file at the path is either absent or a marked turnlog database (never half-made, never
clobbering a file that appeared meanwhile).

Read-only opens (`sqlite_uri(path, read_only=True)`): `mode=ro`, and `immutable=1` when no
write-ahead log exists and the file or its folder is read-only, so that SQLite creates no
-wal/-shm files there; a file with a live -wal is read through it (its -shm exists already).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import stat
import struct
import sys
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from ..errors import DamagedDatabase, DatabaseInUse, ReadOnlyDatabase, StoreError
from .sqlite_errors import damage_in, system_problem
from .uri import file_uri

MARKER_TABLE = "turnlog_meta"
FORMAT = "turnlog"
FORMAT_VERSION = 1
EVENTS_TABLE = "stored_events"
POSITIONS_TABLE = "projection_positions"
EVENT_COLUMNS = {"originator_id", "originator_version", "topic", "state"}
POSITION_COLUMNS = {"name", "position"}
SQLITE_HEADER = b"SQLite format 3\x00"
REBUILD_LOCK = "-rebuild.lock"  # beside a read-model file: one rebuild at a time (projections/parallel.py)


@dataclass(frozen=True)
class Identity:
    kind: str  # missing | turnlog | legacy
    path: str


def writable(path: str) -> bool:
    """Can turnlog write this file and the -wal/-shm beside it?

    Write permission bits are honoured even for root (who could write anyway): a database a user
    marked read-only (chmod a-w, of the file or its folder) is treated as read-only by everyone.
    """
    folder = os.path.dirname(os.path.abspath(path))
    for target in ([path] if os.path.exists(path) else []) + [folder]:
        if not os.access(target, os.W_OK) or not os.stat(target).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
            return False
    return True


def sqlite_uri(path: str, *, read_only: bool) -> str:
    """The URI SQLite opens `path` by (the library's SQLite connections take URIs)."""
    if not read_only:
        return file_uri(path)
    if not os.path.exists(path + "-wal") and not writable(path):
        return file_uri(path, mode="ro", immutable=1)  # nothing can write it, and no -wal/-shm is made
    return file_uri(path, mode="ro")


def _connect_ro(path: str) -> sqlite3.Connection:
    # Through the WAL when there is one (a live database); otherwise immutable, which reads the
    # file alone and creates nothing beside it.
    if os.path.exists(path + "-wal") and os.path.exists(path + "-shm"):
        try:
            conn = sqlite3.connect(file_uri(path, mode="ro"), uri=True)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.DatabaseError:
            pass
    return sqlite3.connect(file_uri(path, mode="ro", immutable=1), uri=True)


def identify(path: str, *, views_only: bool = False) -> Identity:
    """What the file at `path` is, read without writing; raises StoreError for anything that is
    not a turnlog database. `views_only`: a read-model file kept apart from its log (beside a
    PostgreSQL log, or `views=` beside an SQLite one): never a file holding events of its own."""
    if not os.path.lexists(path):
        return Identity("missing", path)
    refuse_unless_regular(path)
    try:
        with open(path, "rb") as f:
            header = f.read(100)
        size = os.path.getsize(path)
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e.strerror or e}") from None
    if not header:
        raise StoreError(f"{path} is an empty file, not a turnlog database (remove it to create one there)")
    if not header.startswith(SQLITE_HEADER):
        raise StoreError(f"{path} is not a turnlog database (not an SQLite file)")
    # A live database's checkpoint may write the header's page count before the pages it counts:
    # with a -wal beside it, a short file is a writer mid-checkpoint, and SQLite itself judges it.
    if size < _expected_size(header) and not os.path.exists(path + "-wal"):
        raise StoreError(f"{path} is truncated ({size} bytes of {_expected_size(header)}): not a readable turnlog"
                         " database")
    try:
        conn = _connect_ro(path)
        try:
            return _classify(conn, path, views_only)
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise unreadable(path, e) from None


def refuse_unless_regular(path: str) -> None:
    """A database is a regular file (or a link to one): opening a FIFO would wait for a writer
    forever, a device is never a database."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise StoreError(f"{path} is a symbolic link to nothing, not a turnlog database") from None
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e.strerror or e}") from None
    if stat.S_ISREG(mode):
        return
    what = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
        "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else \
        "not a regular file"
    raise StoreError(f"{path} is {what}, not a turnlog database")


def unreadable(path: str, error: sqlite3.Error) -> StoreError:
    """The one line for an SQLite error met while reading what a file is: a problem of the disk
    or system is named as such, never as a file of the wrong kind."""
    problem = system_problem(error)
    if problem is not None:
        return StoreError(f"cannot read {path}: {problem} ({error}); the file itself was not judged")
    damage = damaged(path, error)
    return damage if damage is not None else StoreError(f"{path} is not a turnlog database ({error})")


def damaged(path: str, error: BaseException) -> DamagedDatabase | None:
    """DamagedDatabase naming `path` when `error` (or an error under it) is SQLite finding the
    file's pages damaged, met while opening or on any read after; None for any other error."""
    damage = damage_in(error)
    if damage is None:
        return None
    return DamagedDatabase(f"{path} is damaged ({damage}): restore it from a backup (turnlog restore)")


def _expected_size(header: bytes) -> int:
    """The file size SQLite's header promises (page size x page count), 0 when it does not say."""
    if len(header) < 100:
        return 100
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The page count is valid only when written by the same change as the version-valid-for number.
    return page_size * pages if header[24:28] == header[92:96] else 0


def _classify(conn: sqlite3.Connection, path: str, views_only: bool) -> Identity:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if MARKER_TABLE in tables:
        meta = dict(conn.execute(f"SELECT key, value FROM {MARKER_TABLE}").fetchall())
        if meta.get("format") != FORMAT:
            raise StoreError(f"{path} is an SQLite database but not a turnlog one (its {MARKER_TABLE} names"
                             f" format {str(meta.get('format'))[:40]!r})")
        try:
            version = int(meta.get("format_version", ""))
        except ValueError:
            raise StoreError(f"{path} has a damaged {MARKER_TABLE} table (no format_version)") from None
        if version > FORMAT_VERSION:
            raise StoreError(f"{path} was made by a newer turnlog (format {version}; this one reads up to"
                             f" {FORMAT_VERSION})")
        if views_only and EVENTS_TABLE in tables and conn.execute(f"SELECT 1 FROM {EVENTS_TABLE} LIMIT 1").fetchone():
            raise StoreError(f"{path} holds a log of its own: it cannot keep another log's read models")
        return Identity("turnlog", path)
    if not tables:
        raise StoreError(f"{path} is an SQLite database with no tables, not a turnlog database")
    if _has_columns(conn, POSITIONS_TABLE, POSITION_COLUMNS, tables):
        if views_only and EVENTS_TABLE not in tables:
            return Identity("legacy", path)
        if _has_columns(conn, EVENTS_TABLE, EVENT_COLUMNS, tables) and conn.execute(
                f"SELECT 1 FROM {EVENTS_TABLE} WHERE topic NOT LIKE 'turnlog%' LIMIT 1").fetchone() is None:
            return Identity("legacy", path)
    what = f"it has a {EVENTS_TABLE} table, but no turnlog marker" if EVENTS_TABLE in tables else \
        "it has no turnlog marker"
    raise StoreError(f"{path} is an SQLite database but not a turnlog one ({what})")


def _has_columns(conn: sqlite3.Connection, table: str, columns: set[str], tables: set[str]) -> bool:
    if table not in tables:
        return False
    return columns <= {r[1] for r in conn.execute(f"PRAGMA table_info([{table}])")}


def _marker_sql(conn: sqlite3.Connection) -> None:
    conn.execute(f"CREATE TABLE IF NOT EXISTS {MARKER_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.executemany(f"INSERT OR IGNORE INTO {MARKER_TABLE} (key, value) VALUES (?, ?)",
                     [("format", FORMAT), ("format_version", str(FORMAT_VERSION)),
                      ("created_at", datetime.now(UTC).isoformat())])


# The longest name made beside a database file: `.NAME.<12 hex>.compacting` (backup.beside), with
# the `-journal` SQLite keeps beside that while it writes it.
SIDE_NAME_ROOM = len("..123456789abc.compacting-journal")


def _name_max(folder: str) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def require_folder(path: str) -> str:
    """The folder a database to be made at `path` goes in, which must exist."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise StoreError(f"cannot create database {path}: directory {folder} does not exist")
    return folder


def create(path: str) -> None:
    """Make a new, marked turnlog database at `path`, whole or not at all; a file that appears
    there meanwhile is kept (and identified by the caller)."""
    folder = require_folder(path)
    if not writable(path):
        raise ReadOnlyDatabase(f"cannot create database {path}: directory {folder} is read-only")
    name = len(os.fsencode(os.path.basename(path)))
    room = _name_max(folder) - SIDE_NAME_ROOM
    if name > room:
        raise StoreError(f"cannot create database {path}: its name is {name} bytes, at most {room} here"
                         " (the files made beside it, such as .NAME.<id>.compacting-journal, need the rest)")
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex[:12]}.creating")
    try:
        conn = sqlite3.connect(tmp)
        try:
            # Space freed by an archive is given back by `PRAGMA incremental_vacuum`, never by an
            # in-place VACUUM (which rewrites the whole file under a replicator's feet); the mode
            # can only be chosen before the first table.
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
            with conn:
                _marker_sql(conn)
        finally:
            conn.close()
        try:
            os.link(tmp, path)  # fails if a file appeared at `path`: never clobbered
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            if not os.path.lexists(path):
                os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def mark(path: str) -> None:
    """Write the marker into a database adopted from an earlier turnlog (opened for writing)."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            _marker_sql(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()


def prepare(path: str, *, read_only: bool, create_missing: bool, views_only: bool = False) -> Identity:
    """Check the file before anything opens it: identify it (read-only), then create a missing
    one (when allowed) or refuse to write a read-only one."""
    identity = identify(path, views_only=views_only)
    if identity.kind == "missing":
        if read_only or not create_missing:
            raise StoreError(f"no turnlog database at {path} (only commands that write create one)")
        create(path)
        return identify(path, views_only=views_only)
    if not read_only and not writable(path):
        raise ReadOnlyDatabase(f"{path} is read-only (this needs to write to it)")
    return identity


def describe(path: str) -> dict[str, str]:
    """Which database a file is (what an archive's manifest names): its path and when turnlog made it."""
    conn = _connect_ro(path)
    try:
        meta = dict(conn.execute(f"SELECT key, value FROM {MARKER_TABLE}").fetchall())
    except sqlite3.Error:
        meta = {}
    finally:
        conn.close()
    return {"path": os.path.abspath(path), "created_at": meta.get("created_at", ""),
            "format": meta.get("format", FORMAT), "format_version": meta.get("format_version", str(FORMAT_VERSION))}


def read_connection(path: str) -> sqlite3.Connection:
    """A connection that can only read `path` (through its write-ahead log when it has one)."""
    return _connect_ro(path)


# SQLite's lock bytes (os_unix.c): PENDING, RESERVED, then the SHARED range of 510 bytes.
_LOCK_START = 0x40000000
_LOCK_LENGTH = 512
# struct flock: Linux orders it type, whence, start, len, pid; the BSDs and macOS start, len, pid, type, whence.
_BSD_FLOCK = sys.platform == "darwin" or "bsd" in sys.platform


def refuse_if_in_use(path: str) -> None:
    """DatabaseInUse when another process holds the SQLite database at `path` open."""
    pid = holder(path)
    if pid is not None:
        raise DatabaseInUse(f"{path} is in use by process {pid}: stop the gateways and tools using it first")


def holder(path: str) -> int | None:
    """The id of a process holding the database at `path` open (its SQLite lock), or None."""
    for name in (path, path + "-shm"):
        if not os.path.exists(name):
            continue
        fd = os.open(name, os.O_RDONLY)
        try:
            start, length = (_LOCK_START, _LOCK_LENGTH) if name == path else (120, 16)  # -shm: the WAL-index locks
            kind, pid = _conflicting_lock(fd, start, length)
        finally:
            os.close(fd)
        if kind != fcntl.F_UNLCK:
            return pid
    return None


def _conflicting_lock(fd: int, start: int, length: int) -> tuple[int, int]:
    """F_GETLK for a write lock on the range: the kind of lock in the way (F_UNLCK: none) and its holder."""
    if _BSD_FLOCK:
        probe = struct.pack("qqihh", start, length, 0, fcntl.F_WRLCK, os.SEEK_SET)
        _, _, pid, kind, _ = struct.unpack("qqihh", fcntl.fcntl(fd, fcntl.F_GETLK, probe))
    else:
        probe = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, start, length, 0)
        kind, _, _, _, pid = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, probe))
    return kind, pid
