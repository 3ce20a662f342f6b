"""Encryption at rest: the master key, the per-subject data keys (AES-256-GCM) and their tables.

The master key (32 bytes) comes from, in order: a callable (or bytes) given to `turnlog.open(...,
master_key=...)` (a KMS hook), `TURNLOG_MASTER_KEY` (base64), or a file beside the database
(`<db>.key`, base64, made with mode 0600 when a new database is made). It never enters the
database: data keys are stored wrapped by it, and the database names it only by fingerprint.

Tables, in the log's own database (SQLite file or PostgreSQL), never in the events (a key must
be destroyable; events are immutable):
- `turnlog_encryption`: the marker (one row): scheme, master-key fingerprint, the wrapped key
  of subject hashes, and `since`, the first log position written sealed (1 for a database
  encrypted from birth; later for one migrated by `turnlog encrypt`).
- `turnlog_data_keys`: one row per data key: its id, its subject's keyed hash, the key wrapped
  by the master key; erase sets `wrapped` to NULL and stamps `erased_at`. A subject erased
  and heard from again gets a new key (a new row).

Unwrapped keys are kept in memory (an LRU), so a turn never unwraps a key per event.
"""

from __future__ import annotations

import base64
import binascii
import os
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Callable, Union

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..domain.sealing import SCHEME, fingerprint, subject_hash
from ..errors import EncryptionKeyMissing, InvalidRequest, InvalidSetting, StoreError, TurnlogError

MasterKey = Union[bytes, Callable[[], bytes], None]
ENV_KEY = "TURNLOG_MASTER_KEY"
KEY_BYTES = 32
NONCE_BYTES = 12
CACHE_SIZE = 4096
_WRAP_AAD = b"turnlog-data-key:"
META = "turnlog_encryption"
DATA_KEYS = "turnlog_data_keys"


def key_file(local_file: str) -> str:
    return local_file + ".key"


def decode_key(text: str | bytes, where: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise _bad_key(where, "is not base64") from None
    if len(key) != KEY_BYTES:
        raise _bad_key(where, f"is {len(key)} bytes, not {KEY_BYTES}")
    return key


def _bad_key(where: str, what: str) -> TurnlogError:
    """A bad TURNLOG_MASTER_KEY is a bad setting, said as every TURNLOG_* one is, but without its
    value (a secret); a bad key file is a key missing."""
    if where == ENV_KEY:
        return InvalidSetting(f"{ENV_KEY} (its value not shown) {what}: give the {KEY_BYTES}-byte master key in base64")
    return EncryptionKeyMissing(f"the master key in {where} {what}")


def encode_key(key: bytes) -> str:
    return base64.b64encode(key).decode()


def asked_once(given: MasterKey) -> MasterKey:
    """A master-key callable asked at most once per open (a KMS call is slow, and may be billed)."""
    if not callable(given):
        return given
    answer: list[bytes] = []

    def once() -> bytes:
        if not answer:
            answer.append(given())
        return answer[0]
    return once


def read_key_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return decode_key(f.read(), path)
    except OSError as e:
        raise EncryptionKeyMissing(f"cannot read the master key file {path}: {e.strerror or e}") from None


def resolve_master_key(given: MasterKey, file_path: str | None) -> tuple[bytes | None, str]:
    """The master key at hand and where it came from ("callable", "env", "file", "none")."""
    if given is not None:
        key = given() if callable(given) else given
        if not isinstance(key, bytes) or len(key) != KEY_BYTES:
            raise EncryptionKeyMissing(f"the master_key given is not {KEY_BYTES} bytes")
        return key, "callable"
    text = os.environ.get(ENV_KEY)
    if text:
        return decode_key(text, ENV_KEY), "env"
    if file_path is not None and os.path.exists(file_path):
        return read_key_file(file_path), "file"
    return None, "none"


def write_key_file(path: str, key: bytes, *, replace: bool = False) -> bool:
    """Write a key file readable by its owner only, whole or not at all; without `replace`, a
    file already there is kept (False: another process made it first)."""
    tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (encode_key(key) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        if replace:
            os.replace(tmp, path)
            return True
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def new_key() -> bytes:
    return AESGCM.generate_key(bit_length=256)


def wrap(master: bytes, key_id: str, key: bytes) -> bytes:
    nonce = os.urandom(NONCE_BYTES)
    return nonce + AESGCM(master).encrypt(nonce, key, _WRAP_AAD + key_id.encode())


def unwrap(master: bytes, key_id: str, wrapped: bytes) -> bytes:
    try:
        return AESGCM(master).decrypt(wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:], _WRAP_AAD + key_id.encode())
    except Exception:
        raise EncryptionKeyMissing(f"data key {key_id} does not open with this master key") from None


@dataclass(frozen=True)
class Marker:
    scheme: str
    fingerprint: str
    hash_key_wrapped: bytes
    since: int


class KeyTables:
    """The key tables through the log's own datastore (the library's SQLite or PostgreSQL pool)."""

    def __init__(self, datastore: Any, dialect: str, events_table: str = "stored_events") -> None:
        self.datastore = datastore
        self.dialect = dialect
        self.events_table = events_table
        self.blob = "BYTEA" if dialect == "postgres" else "BLOB"

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgres" else sql

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(self._sql(sql), params)
            return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in c.fetchall()]

    def write(self, statements: list[tuple[str, tuple[Any, ...]]], *, ordered_with_writes: bool = False) -> None:
        """`ordered_with_writes`: under the events table's write lock, so that no write of events runs
        beside it (PostgreSQL; on SQLite every write transaction is alone already): erased_keys.py."""
        if ordered_with_writes and self.dialect == "postgres":
            statements = [(f"LOCK TABLE {self.events_table} IN EXCLUSIVE MODE", ()), *statements]
        with self.datastore.transaction(commit=True) as c:
            for sql, params in statements:
                c.execute(self._sql(sql), params)

    def exists(self) -> bool:
        if self.dialect == "postgres":
            found = self.rows("SELECT to_regclass(?) IS NOT NULL", (META,))
            return bool(found and found[0][0])
        return bool(self.rows("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (META,)))

    def create_statements(self) -> list[tuple[str, tuple[Any, ...]]]:
        return [
            (f"CREATE TABLE IF NOT EXISTS {META} (id INTEGER PRIMARY KEY CHECK (id = 1), scheme TEXT NOT NULL,"
             f" fingerprint TEXT NOT NULL, hash_key {self.blob} NOT NULL, since BIGINT NOT NULL,"
             " created_at TEXT NOT NULL)", ()),
            (f"CREATE TABLE IF NOT EXISTS {DATA_KEYS} (key_id TEXT PRIMARY KEY, subject_hash TEXT NOT NULL,"
             f" wrapped {self.blob}, created_at TEXT NOT NULL, erased_at TEXT)", ()),
            (f"CREATE UNIQUE INDEX IF NOT EXISTS {DATA_KEYS}_live ON {DATA_KEYS} (subject_hash)"
             " WHERE erased_at IS NULL", ()),
            *self.erased_index(),
        ]

    def erased_index(self) -> list[tuple[str, tuple[Any, ...]]]:
        """The index that counts erased keys by reading only them (KeyStore.erased)."""
        return [(f"CREATE INDEX IF NOT EXISTS {DATA_KEYS}_erased ON {DATA_KEYS} (erased_at)"
                 " WHERE erased_at IS NOT NULL", ())]

    def marker(self) -> Marker | None:
        if not self.exists():
            return None
        found = self.rows(f"SELECT scheme, fingerprint, hash_key, since FROM {META} WHERE id = 1")
        if not found:
            return None
        scheme, fp, hash_key, since = found[0]
        return Marker(scheme, fp, bytes(hash_key), int(since))


class KeyStore:
    """The data keys of one database, unwrapped on first use and kept (LRU)."""

    def __init__(self, tables: KeyTables, master: bytes, marker: Marker, *, read_only: bool) -> None:
        self.tables = tables
        self.master = master
        self.marker = marker
        self.read_only = read_only
        self.hash_key = unwrap(master, "subject-hash", marker.hash_key_wrapped)
        self._lock = threading.Lock()
        self._by_id: OrderedDict[str, AESGCM | None] = OrderedDict()  # None: erased
        self._by_subject: OrderedDict[str, tuple[str, AESGCM]] = OrderedDict()

    @classmethod
    def initialise(cls, tables: KeyTables, master: bytes, since: int) -> "KeyStore":
        """Mark the database encrypted from position `since` on (the marker's row is new)."""
        hash_key = new_key()
        marker = Marker(SCHEME, fingerprint(master), wrap(master, "subject-hash", hash_key), since)
        tables.write([*tables.create_statements(),
                      (f"INSERT INTO {META} (id, scheme, fingerprint, hash_key, since, created_at) VALUES"
                       " (1, ?, ?, ?, ?, ?)", (marker.scheme, marker.fingerprint, marker.hash_key_wrapped, since,
                                                _now()))])
        return cls(tables, master, marker, read_only=False)

    @property
    def fingerprint(self) -> str:
        return self.marker.fingerprint

    def subject_hash(self, subject: str) -> str:
        return subject_hash(self.hash_key, subject)

    def key_for(self, subject: str) -> tuple[str, AESGCM]:
        """The live data key of a subject (made on first use)."""
        with self._lock:
            found = self._by_subject.get(subject)
            if found is not None:
                self._by_subject.move_to_end(subject)
                return found
        hashed = self.subject_hash(subject)
        for _ in range(3):
            rows = self.tables.rows(f"SELECT key_id, wrapped FROM {DATA_KEYS} WHERE subject_hash = ?"
                                    " AND erased_at IS NULL", (hashed,))
            if rows:
                key_id, wrapped = rows[0]
                found = (key_id, AESGCM(unwrap(self.master, key_id, bytes(wrapped))))
                with self._lock:
                    _put(self._by_subject, subject, found)
                    _put(self._by_id, key_id, found[1])
                return found
            if self.read_only:
                raise StoreError("a read-only open cannot make a data key")
            key_id, raw = uuid.uuid4().hex, new_key()
            try:
                self.tables.write([(f"INSERT INTO {DATA_KEYS} (key_id, subject_hash, wrapped, created_at)"
                                    " VALUES (?, ?, ?, ?)", (key_id, hashed, wrap(self.master, key_id, raw),
                                                             _now()))])
            except Exception:  # another process made the subject's key first: read theirs
                continue
            found = (key_id, AESGCM(raw))
            with self._lock:
                _put(self._by_subject, subject, found)
                _put(self._by_id, key_id, found[1])
            return found
        raise StoreError(f"cannot make a data key for a subject (hash {hashed})")

    def key_by_id(self, key_id: str) -> AESGCM | None:
        """A data key by id; None once erased."""
        with self._lock:
            if key_id in self._by_id:
                self._by_id.move_to_end(key_id)
                return self._by_id[key_id]
        rows = self.tables.rows(f"SELECT wrapped FROM {DATA_KEYS} WHERE key_id = ?", (key_id,))
        if not rows:
            raise StoreError(f"the log names data key {key_id}, which its key table does not hold")
        wrapped = rows[0][0]
        key = AESGCM(unwrap(self.master, key_id, bytes(wrapped))) if wrapped is not None else None
        with self._lock:
            _put(self._by_id, key_id, key)
        return key

    def erased(self) -> int:
        """How many data keys are erased: a number that grows with every erase, whichever process made it."""
        return int(self.tables.rows(f"SELECT count(*) FROM {DATA_KEYS} WHERE erased_at IS NOT NULL")[0][0])

    def live_keys(self, subject: str) -> list[str]:
        return [r[0] for r in self.tables.rows(f"SELECT key_id FROM {DATA_KEYS} WHERE subject_hash = ?"
                                               " AND erased_at IS NULL", (self.subject_hash(subject),))]

    def destroy(self, subject: str, at: str) -> list[str]:
        """Destroy every live data key of a subject; returns their ids."""
        key_ids = self.live_keys(subject)
        if key_ids:
            self.tables.write([(f"UPDATE {DATA_KEYS} SET wrapped = NULL, erased_at = ? WHERE key_id = ?", (at, k))
                               for k in key_ids], ordered_with_writes=True)
        self.forget()
        return key_ids

    def forget(self) -> None:
        with self._lock:
            self._by_id.clear()
            self._by_subject.clear()

    def rotate(self, new_master: bytes) -> int:
        """Re-wrap every live data key (and the subject-hash key) under a new master key, in one
        transaction; events are not touched. Returns how many data keys were re-wrapped."""
        if len(new_master) != KEY_BYTES:
            raise InvalidRequest(f"a master key is {KEY_BYTES} bytes")
        rows = self.tables.rows(f"SELECT key_id, wrapped FROM {DATA_KEYS} WHERE wrapped IS NOT NULL")
        statements: list[tuple[str, tuple[Any, ...]]] = [
            (f"UPDATE {DATA_KEYS} SET wrapped = ? WHERE key_id = ?",
             (wrap(new_master, key_id, unwrap(self.master, key_id, bytes(wrapped))), key_id))
            for key_id, wrapped in rows]
        hash_wrapped = wrap(new_master, "subject-hash", self.hash_key)
        new_fp = fingerprint(new_master)
        statements.append((f"UPDATE {META} SET fingerprint = ?, hash_key = ? WHERE id = 1", (new_fp, hash_wrapped)))
        self.tables.write(statements)
        self.master = new_master
        self.marker = Marker(self.marker.scheme, new_fp, hash_wrapped, self.marker.since)
        return len(rows)


def _put(cache: "OrderedDict[Any, Any]", key: Any, value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > CACHE_SIZE:
        cache.popitem(last=False)


def _now() -> str:
    return datetime.now(UTC).isoformat()

