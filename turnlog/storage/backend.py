"""Where the log is stored, behind one small interface: `create(location)` picks the backend.

An SQLite path (or `sqlite:///path`) is the embedded default: events and read models share one
file (sqlite_backend.py). A `postgresql://` URL puts the log in PostgreSQL; the read models
then stay in a local SQLite file beside the process (postgres_backend.py). Callers never ask
which one they have: what differs is a method of the backend.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Protocol

from eventsourcing.application import Application

from ..errors import InvalidRequest, StoreError
from .log import LogAccess
from .postgres_backend import PostgresBackend
from .sqlite_backend import SqliteBackend
from .store import TurnlogApplication


class Backend(Protocol):
    @property
    def display(self) -> str:
        """How messages name the store."""
        ...

    @property
    def views_path(self) -> str:
        """The SQLite file (or URI) holding the read models."""
        ...

    @property
    def env(self) -> dict[str, str]:
        """The eventsourcing application's environment."""
        ...

    def local_file(self) -> str:
        """The SQLite file this process opens and may write (the log's own file, or the read models')."""
        ...

    def has_log(self) -> bool:
        """Whether the log exists yet (a dry run against an SQLite file not made yet reads an empty log)."""
        ...

    def writable(self) -> bool:
        """Whether this process may write its local file (and the -wal/-shm beside it)."""
        ...

    def prepare(self, *, read_only: bool, create_missing: bool) -> "Backend":
        """Check what the files are before anything opens them (StoreError for anything that is not
        a turnlog database), create a missing one when allowed; returns the backend to open, which
        for `read_only` opens them by read-only URIs and creates no table."""
        ...

    def open_application(self) -> TurnlogApplication:
        ...

    def log_access(self, app: Application, views_db: sqlite3.Connection) -> LogAccess:
        """How the log reader runs SQL on the events table (storage/log.py)."""
        ...

    def backup_file(self) -> str:
        """The file `backup` copies: the SQLite log's own; StoreError for a log kept elsewhere
        (PostgreSQL is backed up with pg_dump) or in the caller's own URI."""
        ...

    def same_store(self, other: "Backend") -> bool:
        """Whether `other` names this very log (however its location is spelled)."""
        ...


def create(location: str | os.PathLike[str], views_path: str | None = None) -> Backend:
    text = os.fspath(location) if isinstance(location, (str, os.PathLike)) else location
    if not isinstance(text, str):
        raise InvalidRequest(f"the database location must be a path or a postgresql:// URL, not {type(text).__name__}")
    views_path = os.fspath(views_path) if isinstance(views_path, os.PathLike) else views_path
    if views_path is not None and not isinstance(views_path, str):
        raise InvalidRequest(f"views must be the path of a read-model file, not {type(views_path).__name__}")
    if not text:
        raise StoreError("the database location is empty")
    if needs_views(text):
        return PostgresBackend.from_url(text, views_path)
    return SqliteBackend.from_path(text, views_path)


def needs_views(location: str | os.PathLike[str]) -> bool:
    """Whether the log at `location` keeps its read models in a file of their own (PostgreSQL)."""
    return os.fspath(location).startswith(("postgresql://", "postgres://"))
