"""The embedded backend: the log and the read models in one SQLite file (WAL mode), written
through turnlog's SQLite factory (sqlite_factory.py: pragmas, the sealing writer, checkpoints).

A path is opened as given; a `file:` URI or an in-memory name is the caller's own and is
opened as it is, unchecked.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path

from eventsourcing.application import Application
from eventsourcing.sqlite import SQLiteApplicationRecorder

from ..domain.env_flags import SQLITE_LOCK_TIMEOUT, env_whole_seconds
from ..errors import StoreError
from . import dbfile
from .log import LogAccess
from .store import COMPRESSOR, MAPPER, SQLITE_FACTORY, TRANSCODER, TurnlogApplication
from .uri import file_uri


@dataclass(frozen=True)
class SqliteBackend:
    path: str  # the file (or the caller's own URI) as given
    env: dict[str, str]
    views_path: str
    display: str

    @classmethod
    def from_path(cls, text: str, views_path: str | None = None) -> "SqliteBackend":
        if text.startswith("sqlite:"):
            text = text.split("sqlite:", 1)[1]
            text = text[2:] if text.startswith("//") else text
        path = str(Path(text).expanduser())
        env = {
            "PERSISTENCE_MODULE": SQLITE_FACTORY,
            "SQLITE_DBNAME": path,
            "SQLITE_LOCK_TIMEOUT": str(env_whole_seconds(*SQLITE_LOCK_TIMEOUT)),
            "TRANSCODER_TOPIC": TRANSCODER,
            "COMPRESSOR_TOPIC": COMPRESSOR,
            "MAPPER_TOPIC": MAPPER,
        }
        return cls(path=path, env=env, views_path=views_path or path, display=path)

    def callers_own(self) -> bool:
        """Whether the location is the caller's own `file:` URI or an in-memory name (opened
        as given, unchecked), not a path turnlog manages."""
        return _callers_own(self.path)

    def local_file(self) -> str:
        return self.path

    def has_log(self) -> bool:
        return self.callers_own() or os.path.lexists(self.path)

    def writable(self) -> bool:
        return self.callers_own() or dbfile.writable(self.path)

    def prepare(self, *, read_only: bool, create_missing: bool) -> "SqliteBackend":
        if self.callers_own():
            return self
        separate_views = self.views_path != self.path and not _callers_own(self.views_path) and not read_only
        if separate_views and not os.path.lexists(self.views_path):
            dbfile.require_folder(self.views_path)  # before the log is made: refused, nothing is left
        identity = dbfile.prepare(self.path, read_only=read_only, create_missing=create_missing)
        if separate_views:
            # Read models kept in a file of their own (views=): checked as a PostgreSQL log's are,
            # a cache of the log made when missing.
            dbfile.prepare(self.views_path, read_only=False, create_missing=True, views_only=True)
        if not read_only:
            if identity.kind == "legacy":
                dbfile.mark(self.path)
            return self
        uri = dbfile.sqlite_uri(self.path, read_only=True)
        return replace(self, env={**self.env, "SQLITE_DBNAME": uri, "CREATE_TABLE": "false"}, views_path=uri)

    def open_application(self) -> TurnlogApplication:
        try:
            return TurnlogApplication(env=self.env)
        except Exception as e:  # the library raises a variety of driver errors on a bad store
            raise dbfile.damaged(self.display, e) or StoreError(f"cannot open {self.display}: {e}") from None

    def backup_file(self) -> str:
        if self.callers_own():
            raise StoreError(f"{self.display} is not a database file turnlog manages: it cannot be backed up")
        return self.path

    def same_store(self, other: object) -> bool:
        return isinstance(other, SqliteBackend) and os.path.realpath(other.path) == os.path.realpath(self.path)

    def log_access(self, app: Application, views_db: sqlite3.Connection) -> LogAccess:
        recorder = app.recorder
        if not isinstance(recorder, SQLiteApplicationRecorder):
            return LogAccess()  # a recorder of the caller's: read through the library's API
        uuid_ids = recorder.datastore.originator_id_type == "uuid"
        table = recorder.events_table_name
        db_name = recorder.datastore.pool.db_name
        if db_name == self.views_path and db_name.startswith("file:") and ":memory:" not in db_name:
            return LogAccess(same_file=True, sql=views_db, uuid_ids=uuid_ids, table=table)  # a read-only open
        if _callers_own(db_name):
            return LogAccess(uuid_ids=uuid_ids, table=table)
        if not _callers_own(self.views_path) and os.path.realpath(db_name) == os.path.realpath(self.views_path):
            return LogAccess(same_file=True, sql=views_db, uuid_ids=uuid_ids, table=table)
        conn = sqlite3.connect(file_uri(db_name, mode="ro"), uri=True, timeout=30, check_same_thread=False)
        return LogAccess(sql=conn, uuid_ids=uuid_ids, table=table, owned=True)


def _callers_own(name: str) -> bool:
    return name.startswith("file:") or ":memory:" in name
