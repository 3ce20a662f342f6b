"""Backing an SQLite log up while gateways write, and restoring a backup in place of a database.

A backup is taken through SQLite's online backup API in one step: one read transaction, so the
copy is the database as of one commit while writers go on (WAL mode: a reader blocks no writer).
It is written beside OUT under a temporary name, turned into a self-contained file (rollback
journal, no -wal), checked (SQLite's quick_check, the hash chain recomputed) and only then
renamed to OUT: a file at OUT is a whole, verified backup.

A restore refuses to replace a database in use. SQLite (unix) holds a POSIX lock on the
database file for as long as a connection in WAL mode has it open, idle or not; asking the
kernel whether a write lock on that range would conflict (F_GETLK) tells, without taking or
changing anything, whether another process has it open. (A connection of this same process
is not seen: POSIX locks never conflict within one process.)
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import uuid
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

from ..errors import ReadOnlyDatabase, StoreError
from . import dbfile
from .dbfile import refuse_if_in_use
from .chain import ChainSealer
from .encryption import file_fingerprint, require_key
from .keys import MasterKey, key_file, read_key_file, write_key_file
from .sqlite_backend import SqliteBackend

Progress = Callable[[int, int], None]
_HASH_CHUNK = 1 << 20
STEPS = 3  # copy, verify, hash


@dataclass(frozen=True)
class BackupReport:
    """A verified backup: the file, its size and `sha256`, how many `events` it holds through
    log position `head`, and the hash chain's verdict on it (`chain_ok`). `key_fingerprint`
    names the master key an encrypted log's backup needs (never the key; None: not encrypted)."""
    path: str
    source: str
    bytes: int
    sha256: str
    events: int
    head: int
    chain_ok: bool
    taken_at: str
    key_fingerprint: str | None = None
    read_models: bool = True  # False: left out (they hold the words in clear); the first open rebuilds them

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RestoreReport:
    """A database replaced by a backup: what was restored (`backup`, its `sha256`) to `path`,
    its `events` through `head`, and whether a database was there before (`replaced`)."""
    path: str
    backup: str
    sha256: str
    events: int
    head: int
    replaced: bool
    key_fingerprint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Checked:
    events: int
    head: int
    chain_ok: bool
    breaks: int


def file_sha256(path: str, progress: Callable[[int], None] | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
            if progress is not None:
                progress(len(chunk))
    return h.hexdigest()


def take(source: str, out: str, *, taken_at: str, progress: Progress | None = None,
         leave_out: Sequence[str] = ()) -> BackupReport:
    """Back the SQLite database `source` up to `out` (refused when `out` exists). The tables named
    in `leave_out` (an encrypted log's read models) are dropped from the copy, and the copy
    vacuumed, so that no page of theirs is in the backup."""
    if os.path.lexists(out):
        raise StoreError(f"{out} exists: a backup never replaces a file (remove it or name another)")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise StoreError(f"cannot write the backup {out}: directory {folder} does not exist")
    if not dbfile.writable(out):
        raise ReadOnlyDatabase(f"cannot write the backup {out}: directory {folder} is read-only")
    tmp = beside(out, "backup")
    try:
        _copy(source, tmp)
        if leave_out:
            _drop_tables(tmp, leave_out)
        _step(progress, 1)
        checked = check(tmp)
        if not checked.chain_ok:
            raise StoreError(f"the backup of {source} does not verify: {checked.breaks} break(s) in its hash chain"
                             " (run `turnlog verify --chain` on the database)")
        _step(progress, 2)
        digest = file_sha256(tmp)
        size = os.path.getsize(tmp)
        fsync_file(tmp)
        try:
            os.link(tmp, out)  # never clobbers a file that appeared at `out` meanwhile
        except FileExistsError:
            raise StoreError(f"{out} appeared while the backup was taken: it was left as it is") from None
        fsync_folder(out)
        _step(progress, 3)
    finally:
        _remove(tmp)
    return BackupReport(path=out, source=source, bytes=size, sha256=digest, events=checked.events,
                        head=checked.head, chain_ok=True, taken_at=taken_at, read_models=not leave_out)


def restore(backup: str, target: str, *, force: bool = False, progress: Progress | None = None,
            master_key: MasterKey = None, key_file_path: str | None = None) -> RestoreReport:
    """Put the backup file `backup` in place of the SQLite database `target` (a path or an
    `sqlite:` URL): verified first, the swap one rename. A database already there is replaced
    only with `force`, never while in use. The backup of an encrypted database is restored only
    when its master key is at hand (`master_key`, TURNLOG_MASTER_KEY or `<target>.key`), or is
    in `key_file_path`, which is then copied beside the restored database as `<target>.key`."""
    if target.startswith(("postgresql://", "postgres://")):
        raise StoreError("a PostgreSQL log is restored with pg_restore (docs/operations.md)")
    target = SqliteBackend.from_path(target).path
    if not os.path.lexists(backup):
        raise StoreError(f"no backup file at {backup}")
    dbfile.identify(backup)  # one line for a file that is not a turnlog database
    exists = os.path.lexists(target)
    if exists:
        dbfile.refuse_unless_regular(target)
        refuse_if_in_use(target)
        if not force:
            raise StoreError(f"{target} exists: give --force (force=True) to replace it with the backup")
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        raise StoreError(f"cannot restore to {target}: directory {folder} does not exist")
    needed = file_fingerprint(backup)
    install = None
    if key_file_path is not None:
        install = read_key_file(key_file_path)
        master_key = master_key or install
    if needed is not None:
        require_key(needed, master_key, key_file(target), backup)
    tmp = beside(target, "restoring")
    try:
        _copy(backup, tmp)
        _step(progress, 1)
        checked = check(tmp)
        if not checked.chain_ok:
            raise StoreError(f"the backup {backup} does not verify ({checked.breaks} break(s) in its hash chain):"
                             " nothing was restored")
        _step(progress, 2)
        digest = file_sha256(backup)
        fsync_file(tmp)
        if exists:
            refuse_if_in_use(target)  # again, just before the swap
            _fold_in_wal(target)
        os.replace(tmp, target)
        if install is not None and needed is not None and not os.path.exists(key_file(target)):
            write_key_file(key_file(target), install)
        fsync_folder(target)
        _step(progress, 3)
    finally:
        _remove(tmp)
    return RestoreReport(path=target, backup=backup, sha256=digest, events=checked.events, head=checked.head,
                         replaced=exists, key_fingerprint=needed)


def check(path: str) -> Checked:
    """SQLite's quick_check and the hash chain recomputed, on a file nothing else has open."""
    conn = sqlite3.connect(path)
    try:
        problem = conn.execute("PRAGMA quick_check").fetchone()[0]
        if problem != "ok":
            raise StoreError(f"{path} is damaged: {problem}")
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path} is not a readable turnlog database ({e})") from None
    finally:
        conn.close()
    backend = SqliteBackend.from_path(path).prepare(read_only=False, create_missing=False)
    app = backend.open_application()
    db = sqlite3.connect(path)
    try:
        report = ChainSealer(app, db).report()
        head = app.recorder.max_notification_id() or 0
        events = db.execute(f"SELECT count(*) FROM {dbfile.EVENTS_TABLE}").fetchone()[0]
    finally:
        db.close()
        app.close()
    _single_file(path)
    return Checked(events=events, head=head, chain_ok=not report.breaks, breaks=len(report.breaks))


def _copy(source: str, dest: str) -> None:
    src = sqlite3.connect(dbfile.sqlite_uri(source, read_only=True), uri=True, timeout=30)
    try:
        dst = sqlite3.connect(dest)
        try:
            src.backup(dst)  # pages=-1: one step, one read transaction (a consistent copy)
        finally:
            dst.close()
    except sqlite3.Error as e:
        raise StoreError(f"cannot copy {source}: {e}") from None
    finally:
        src.close()
    _single_file(dest)


def _drop_tables(path: str, tables: Sequence[str]) -> None:
    """Drop those of `tables` the file holds (a virtual table first: its shadow tables go with it),
    then VACUUM: the file is rewritten without their pages, freed or not."""
    conn = sqlite3.connect(path)
    try:
        held = dict(conn.execute("SELECT name, sql LIKE 'CREATE VIRTUAL TABLE%' FROM sqlite_master WHERE type='table'"))
        named = [t for t in tables if t in held]
        with conn:
            for table in sorted(named, key=lambda t: not held[t]):
                conn.execute(f"DROP TABLE IF EXISTS [{table}]")
        conn.execute("VACUUM")
    except sqlite3.Error as e:
        raise StoreError(f"cannot leave the read models out of the backup: {e}") from None
    finally:
        conn.close()


def _single_file(path: str) -> None:
    """The file as one self-contained database: no -wal beside it (the next open turns WAL on)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        conn.close()


def _fold_in_wal(path: str) -> None:
    """Checkpoint what a closed database left in its -wal, then remove -wal/-shm: a WAL left
    beside the restored file would be applied to it."""
    try:
        conn = sqlite3.connect(path, timeout=5)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        pass  # a damaged database being replaced: its WAL goes with it
    for suffix in ("-wal", "-shm"):
        _remove(path + suffix)


def beside(path: str, what: str) -> str:
    folder = os.path.dirname(os.path.abspath(path))
    return os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex[:12]}.{what}")


def _step(progress: Progress | None, done: int) -> None:
    if progress is not None:
        progress(done, STEPS)


def fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_folder(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: str) -> None:
    for name in (path, path + "-journal", path + "-wal", path + "-shm"):
        try:
            os.remove(name)
        except FileNotFoundError:
            pass
