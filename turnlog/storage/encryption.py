"""Turning encryption at rest on for a log, and checking its master key is at hand, before
anything reads or writes (keys.py holds the keys, sealing_mapper.py the sealing).

A database made by this turnlog is encrypted from its first event, unless `encryption=False`
or TURNLOG_ENCRYPTION=0. A PostgreSQL log, or the caller's own SQLite URI, is encrypted only
when a master key is given (`master_key` or TURNLOG_MASTER_KEY): no key file is kept for them.
An existing unencrypted database stays so until `turnlog encrypt` (`start`): from then on new
events are sealed; the events before stay as they were stored, since the hash chain covers
their stored bytes and rewriting them would break it.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from typing import Any

from ..domain.sealing import fingerprint
from ..domain.env_flags import env_flag
from ..errors import EncryptionKeyMissing, InvalidRequest, StoreError
from . import dbfile
from .keys import (DATA_KEYS, META, KeyStore, KeyTables, MasterKey, Marker, key_file, new_key, read_key_file,
                   resolve_master_key, write_key_file)
from .postgres_backend import PostgresBackend
from .sealing_mapper import Sealer, SealingMapper
from .sqlite_backend import SqliteBackend


@dataclass
class Encryption:
    keys: KeyStore
    sealer: Sealer
    source: str  # where the master key came from: callable | env | file
    key_path: str | None  # the key file beside the database (None: it has none)

    @property
    def fingerprint(self) -> str:
        return self.keys.fingerprint


def enabled_by_default() -> bool:
    return env_flag("TURNLOG_ENCRYPTION")


def database_file_of(backend: Any) -> str | None:
    """The SQLite file turnlog manages for this log (what a gateway holds open); None for a
    PostgreSQL log and for the caller's own URI."""
    if isinstance(backend, SqliteBackend) and not backend.callers_own():
        return backend.path
    return None


def key_path_of(backend: Any) -> str | None:
    """The key file beside the database; None for a PostgreSQL log (its processes run on several
    hosts, each with its own read-model file: a key file beside one would not open the log on
    the others, so its key is given by master_key or TURNLOG_MASTER_KEY) and for the caller's own URI."""
    database = database_file_of(backend)
    return key_file(database) if database is not None else None


def tables_of(app: Any, backend: Any) -> KeyTables:
    return KeyTables(app.recorder.datastore, "postgres" if isinstance(backend, PostgresBackend) else "sqlite",
                     app.recorder.events_table_name)


def _check(marker_fp: str, key: bytes | None, source: str, display: str, key_path: str | None) -> bytes:
    if key is None:
        where = f", or put it in {key_path}" if key_path else ""
        raise EncryptionKeyMissing(f"{display} is encrypted and its master key (fingerprint {marker_fp}) is not at"
                                   f" hand: give master_key=, set TURNLOG_MASTER_KEY{where}")
    if fingerprint(key) != marker_fp:
        raise EncryptionKeyMissing(f"{display} needs master key {marker_fp}; the key from {source} is"
                                   f" {fingerprint(key)}")
    return key


def file_fingerprint(path: str) -> str | None:
    """The master-key fingerprint an SQLite database file needs (None: not encrypted), read
    without writing."""
    try:
        conn = dbfile.read_connection(path)
        try:
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (META,)).fetchone():
                return None
            row = conn.execute(f"SELECT fingerprint FROM {META} WHERE id = 1").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None  # dbfile judges the file; the library's open reports what is wrong
    return row[0] if row else None


def _resolve(needed: str, master_key: MasterKey, key_path: str | None) -> tuple[bytes | None, str]:
    """The key at hand; a rotation killed between its commit and moving the new key file into
    place left the new key in `<db>.key.new`: it is used, and moved into place."""
    key, source = resolve_master_key(master_key, key_path)
    pending = f"{key_path}.new" if key_path else None
    if source in ("file", "none") and pending and os.path.exists(pending) and (
            key is None or fingerprint(key) != needed):
        found = read_key_file(pending)
        if fingerprint(found) == needed:
            os.replace(pending, key_path)  # type: ignore[arg-type]
            return found, "file"
    return key, source


def require_key(needed: str, master_key: MasterKey, key_path: str | None, display: str) -> None:
    key, source = _resolve(needed, master_key, key_path)
    _check(needed, key, source, display, key_path)


def refuse_without_key(backend: Any, master_key: MasterKey) -> None:
    """For an SQLite file, before the library opens it: an encrypted one without its master key
    is refused having read only its marker and written nothing."""
    if not isinstance(backend, SqliteBackend) or backend.callers_own() or not os.path.exists(backend.path):
        return
    needed = file_fingerprint(backend.path)
    if needed is not None:
        require_key(needed, master_key, key_path_of(backend), backend.display)


def refuse_bad_key_for_new(backend: Any, master_key: MasterKey, *, enable: bool | None) -> None:
    """For an SQLite file not made yet that will be encrypted, before it is made: a master key
    given that is no key (or a callable that fails) is refused with nothing created, not after
    the new database is on disk."""
    if not isinstance(backend, SqliteBackend) or backend.callers_own() or os.path.lexists(backend.path):
        return
    if enabled_by_default() if enable is None else enable:
        resolve_master_key(master_key, key_path_of(backend))


def attach(app: Any, backend: Any, master_key: MasterKey, *, read_only: bool, enable: bool | None) -> Encryption | None:
    """Seal this open's writes and open its reads when the log is encrypted (or is new and
    encryption is on); None for an unencrypted log."""
    tables = tables_of(app, backend)
    marker = tables.marker()
    key_path = key_path_of(backend)
    if marker is None:
        if read_only or (app.recorder.max_notification_id() or 0) > 0:
            return None
        want = enabled_by_default() if enable is None else enable
        if not want or (key_path is None and master_key is None and not os.environ.get("TURNLOG_MASTER_KEY")):
            return None
        return start(app, backend, master_key)
    key, source = _resolve(marker.fingerprint, master_key, key_path)
    key = _check(marker.fingerprint, key, source, backend.display, key_path)
    return _attach(app, KeyStore(tables, key, marker, read_only=read_only), source, key_path)


def start(app: Any, backend: Any, master_key: MasterKey) -> Encryption:
    """Mark the log encrypted from its next position and seal from now on (a key file is made
    beside the database when no key is given)."""
    tables = tables_of(app, backend)
    if tables.marker() is not None:
        raise InvalidRequest(f"{backend.display} is encrypted already")
    database = database_file_of(backend)
    if database is not None and (app.recorder.max_notification_id() or 0) > 0:
        # A gateway that opened the log before the marker would go on writing its events unsealed
        # after it, where erase cannot reach them: none may have it open (a new log has none).
        dbfile.refuse_if_in_use(database)
    key_path = key_path_of(backend)
    key, source = resolve_master_key(master_key, key_path)
    if key is None:
        if key_path is None:
            raise EncryptionKeyMissing(f"{backend.display} has no place for a key file: give master_key= or set"
                                       " TURNLOG_MASTER_KEY")
        write_key_file(key_path, new_key())  # a file another process made meanwhile wins
        key, source = resolve_master_key(None, key_path)
        assert key is not None
    since = (app.recorder.max_notification_id() or 0) + 1
    try:
        keys = KeyStore.initialise(tables, key, since)
    except Exception:  # another process marked it first: join it, if the key is the same
        found = tables.marker()
        if found is None:
            raise
        keys = KeyStore(tables, _check(found.fingerprint, key, source, backend.display, key_path), found,
                        read_only=False)
    return _attach(app, keys, source, key_path)


def _attach(app: Any, keys: KeyStore, source: str, key_path: str | None) -> Encryption:
    mapper = app.mapper
    if not isinstance(mapper, SealingMapper):
        raise StoreError("this log's mapper cannot seal (MAPPER_TOPIC is not turnlog's)")
    sealer = Sealer(keys, mapper.transcoder)
    mapper.sealer = sealer
    return Encryption(keys, sealer, source, key_path)


def rotate(enc: Encryption, new_master: bytes | None, *, database: str | None) -> tuple[str, str, int]:
    """Re-wrap every data key under a new master key (given, or made and written to the key
    file the old one came from). Returns (old fingerprint, new fingerprint, keys re-wrapped).
    `database`: the database file (database_file_of), refused while another process has it open;
    None: no file to check (PostgreSQL, the caller's own URI).

    The new key file is written beside the old one first (`<db>.key.new`) and moved into place
    after the database commits, so a crash leaves a key that opens the database (`pending_key`)."""
    old = enc.fingerprint
    if database is not None:
        # A gateway that has the file open keeps the old master key: a data key it makes for a new
        # subject would be wrapped by a key that opens nothing any more. None may have it open.
        dbfile.refuse_if_in_use(database)
    if new_master is None:
        if enc.source != "file" or enc.key_path is None:
            raise InvalidRequest(f"the master key comes from {enc.source}: give the new key (turnlog cannot store it)")
        new_master = new_key()
    pending = None
    if enc.source == "file" and enc.key_path is not None:
        pending = enc.key_path + ".new"
        write_key_file(pending, new_master, replace=True)
    count = enc.keys.rotate(new_master)
    if pending is not None and enc.key_path is not None:
        os.replace(pending, enc.key_path)
    return old, enc.fingerprint, count


def marker_of(app: Any, backend: Any) -> Marker | None:
    return tables_of(app, backend).marker()


def purge_snapshots(app: Any) -> None:
    """Drop every aggregate snapshot (a cache of the log, retaken at the next interval): sealed
    under the database's snapshot key, they may hold an erased subject's words."""
    snapshots = getattr(app, "snapshots", None)
    if snapshots is None:
        return
    table = snapshots.recorder.events_table_name
    with app.recorder.datastore.transaction(commit=True) as c:
        c.execute(f"DELETE FROM {table}")


def copy_keys(enc: Encryption, target_app: Any, target: Any) -> None:
    """Give a copy of the log the key tables its sealed events need (the rows as they are: the
    same master key opens them), and the key file beside it when the source keeps one."""
    tables = tables_of(target_app, target)
    source = enc.keys.tables
    marker = source.rows(f"SELECT id, scheme, fingerprint, hash_key, since, created_at FROM {META}")
    keys = source.rows(f"SELECT key_id, subject_hash, wrapped, created_at, erased_at FROM {DATA_KEYS}")
    tables.write([*tables.create_statements(),
                  *[(f"INSERT INTO {META} (id, scheme, fingerprint, hash_key, since, created_at) VALUES"
                     " (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", tuple(row)) for row in marker],
                  *[(f"INSERT INTO {DATA_KEYS} (key_id, subject_hash, wrapped, created_at, erased_at) VALUES"
                     " (?, ?, ?, ?, ?) ON CONFLICT (key_id) DO UPDATE SET wrapped = excluded.wrapped,"
                     " erased_at = excluded.erased_at", tuple(row)) for row in keys]])
    path = key_path_of(target)
    if enc.source == "file" and path is not None and not os.path.exists(path):
        write_key_file(path, enc.keys.master)
