"""The scale-out backend: the log in PostgreSQL (eventsourcing's PostgreSQL persistence), shared
by gateway processes on several hosts; each keeps its read models in a local SQLite file, a
cache of the log made when missing.
"""

from __future__ import annotations

import os
import re
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Iterator, Sequence
from urllib.parse import unquote, urlparse

from eventsourcing.application import Application

from ..errors import InvalidRequest, StoreError
from . import dbfile
from .log import LogAccess
from .store import COMPRESSOR, MAPPER, TRANSCODER, TurnlogApplication

if TYPE_CHECKING:
    from eventsourcing.postgres import PostgresDatastore

POSTGRES_RECORDER = "turnlog.storage.postgres_recorder:OneTripRecorder"
SCHEMA_LOCK_KEY = 0x7475726E6C6F67  # "turnlog": the PostgreSQL advisory lock taken while opening


def _without_credentials(url: str) -> str:
    """The URL as an error may show it: no user or password."""
    return re.sub(r"//[^/]*@", "//", url, count=1)


@dataclass(frozen=True)
class PostgresBackend:
    env: dict[str, str]
    views_path: str
    display: str

    @classmethod
    def from_url(cls, url: str, views_path: str | None) -> "PostgresBackend":
        try:
            parsed = urlparse(url)
            port = parsed.port  # parsed on reading: a port that is no number from 0 to 65535 raises
        except ValueError as e:
            raise InvalidRequest(f"the PostgreSQL URL {_without_credentials(url)!r} is malformed: {str(e).lower()}") from None
        dbname = parsed.path.lstrip("/")
        if not dbname:
            raise StoreError(f"the PostgreSQL URL {_without_credentials(url)!r} names no database")
        if views_path is None:
            raise StoreError("a PostgreSQL log needs a local read-model file (--views PATH or TURNLOG_VIEWS)")
        env = {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": dbname,
            "POSTGRES_HOST": unquote(parsed.hostname or "localhost"),
            "POSTGRES_PORT": str(port or 5432),
            "POSTGRES_USER": unquote(parsed.username or "postgres"),
            "POSTGRES_PASSWORD": unquote(parsed.password or ""),
            "TRANSCODER_TOPIC": TRANSCODER,
            "COMPRESSOR_TOPIC": COMPRESSOR,
            "MAPPER_TOPIC": MAPPER,
            "APPLICATION_RECORDER_TOPIC": POSTGRES_RECORDER,
        }
        return cls(env=env, views_path=views_path, display=f"postgresql://{parsed.hostname}/{dbname}")

    def _callers_own_views(self) -> bool:
        return self.views_path.startswith("file:") or ":memory:" in self.views_path

    def local_file(self) -> str:
        return self.views_path

    def has_log(self) -> bool:
        return True  # on the server: whether it holds events is for the server to say

    def writable(self) -> bool:
        return self._callers_own_views() or dbfile.writable(self.views_path)

    def prepare(self, *, read_only: bool, create_missing: bool) -> "PostgresBackend":
        if self._callers_own_views():
            return self
        # The local read models are a cache of the log: made when missing, unless read-only; not
        # made for a log that cannot be reached (a failed open leaves no file behind).
        if not read_only and not os.path.lexists(self.views_path):
            self._reach()
        identity = dbfile.prepare(self.views_path, read_only=read_only, create_missing=not read_only,
                                  views_only=True)
        if read_only:
            return replace(self, env={**self.env, "CREATE_TABLE": "false"},
                           views_path=dbfile.sqlite_uri(self.views_path, read_only=True))
        if identity.kind == "legacy":
            dbfile.mark(self.views_path)
        return self

    def open_application(self) -> TurnlogApplication:
        try:
            with self._schema_lock():
                return TurnlogApplication(env=self.env)
        except Exception as e:  # the library raises a variety of driver errors on a bad store
            raise StoreError(f"cannot open {self.display}: {e}") from None

    def _reach(self) -> None:
        """Connect to the server once and leave: StoreError, as opening would say, if it cannot be."""
        try:
            self._connect().close()
        except Exception as e:  # the driver's many errors: unreachable, refused, bad password, no database
            raise StoreError(f"cannot open {self.display}: {e}") from None

    def _connect(self) -> Any:
        import psycopg

        env = self.env
        return psycopg.connect(dbname=env["POSTGRES_DBNAME"], host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"],
                               user=env["POSTGRES_USER"], password=env["POSTGRES_PASSWORD"] or None, autocommit=True)

    @contextmanager
    def _schema_lock(self) -> Iterator[None]:
        """Processes opening one log at once take turns: the library creates its tables with
        CREATE TABLE IF NOT EXISTS, which PostgreSQL refuses when two run at the same moment
        ("tuple concurrently updated")."""
        with self._connect() as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_KEY,))

    def backup_file(self) -> str:
        raise StoreError(f"{self.display} is a PostgreSQL log: back it up with pg_dump (docs/operations.md)")

    def same_store(self, other: object) -> bool:
        return isinstance(other, PostgresBackend) and other.env["POSTGRES_HOST"] == self.env["POSTGRES_HOST"] and \
            other.env["POSTGRES_PORT"] == self.env["POSTGRES_PORT"] and \
            other.env["POSTGRES_DBNAME"] == self.env["POSTGRES_DBNAME"]

    def log_access(self, app: Application, views_db: sqlite3.Connection) -> LogAccess:
        # Imported here: the driver loads only for a PostgreSQL log.
        from eventsourcing.postgres import PostgresApplicationRecorder

        recorder = app.recorder
        if not isinstance(recorder, PostgresApplicationRecorder):
            return LogAccess()
        datastore = recorder.datastore
        return LogAccess(sql=PostgresLog(datastore), uuid_ids=datastore.originator_id_type == "uuid",
                         table=recorder.events_table_name)


class PostgresLog:
    """The few queries the log reader makes, run on the log through the recorder's own
    connection pool: its SQL, written for SQLite, names the position `rowid` and marks parameters
    `?`; here they are `notification_id` and `%s`."""

    def __init__(self, datastore: "PostgresDatastore") -> None:
        self.datastore = datastore

    def execute(self, sql: str, params: Sequence[Any] = ()) -> "Rows":
        sql = re.sub(r"\browid\b", "notification_id", sql).replace("?", "%s")
        with self.datastore.transaction(commit=False) as cursor:
            cursor.execute(sql, tuple(params))
            return Rows([tuple(row.values()) if isinstance(row, dict) else tuple(row) for row in cursor.fetchall()])


class Rows(list):  # type: ignore[type-arg]
    def fetchall(self) -> list[Any]:
        return list(self)

    def fetchone(self) -> Any:
        return self[0] if self else None
