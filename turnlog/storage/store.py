"""Opening the event store: one function that takes a path or URL.

An SQLite path (or `sqlite:///path`) is the embedded default: events and read models share one
file. A `postgresql://` URL puts the log in PostgreSQL; the read models then stay in a local
SQLite file beside the process.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from typing import Any, Iterator
from uuid import UUID

from eventsourcing.application import Application, ProcessingEvent
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import Recording

from ..domain.inbox import Inbox
from ..domain.lease import TurnLease
from ..domain.route import Route
from ..domain.session import Session
from ..errors import StoreError

SQLITE_FACTORY = "turnlog.storage.sqlite_factory:TurnlogSQLiteFactory"
TRANSCODER = "turnlog.storage.transcoder:OrjsonTranscoder"
COMPRESSOR = "turnlog.storage.event_compressor:EventCompressor"
EVENTS_TABLE = "stored_events"


class TurnlogApplication(Application):
    name = "turnlog"
    snapshotting_intervals = {Session: 100, Route: 100, TurnLease: 100, Inbox: 100}

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording]:
        """The library's save, without its per-object runtime Protocol checks (about a third of
        the cost of a small save) and snapshotting the saved aggregate instead of reloading it.
        Events go through the public event store (`events.put`); no repository cache is in use."""
        processing: ProcessingEvent[UUID] = ProcessingEvent()
        for obj in objs:
            if isinstance(obj, Aggregate):
                processing.events.extend(obj.collect_events())
                processing.aggregates[obj.id] = obj
            elif obj is not None:
                processing.events.append(obj)
        processing.saved_kwargs.update(kwargs)
        recordings = self.events.put(processing.events, **processing.saved_kwargs)
        self._snapshot_saved(processing)
        return recordings

    def _snapshot_saved(self, processing: ProcessingEvent) -> None:
        if self.snapshots is None:
            return
        for event in processing.events:
            aggregate = processing.aggregates.get(event.originator_id)
            if aggregate is None:
                continue
            interval = self.snapshotting_intervals.get(type(aggregate))
            if interval is None or event.originator_version % interval:
                continue
            if aggregate.version == event.originator_version:
                snapshot_class = getattr(type(aggregate), "Snapshot", type(self).snapshot_class)
                assert snapshot_class is not None  # snapshotting is on (self.snapshots)
                self.snapshots.put([snapshot_class.take(aggregate)])
            else:
                self.take_snapshot(event.originator_id, version=event.originator_version)


@dataclass(frozen=True)
class StoreLocation:
    kind: str  # "sqlite" or "postgres"
    env: dict[str, str]
    views_path: str  # the SQLite file holding the read models
    display: str


def parse_location(location: str | os.PathLike[str], views_path: str | None = None) -> StoreLocation:
    text = os.fspath(location)
    if not text:
        raise StoreError("the database location is empty")
    if text.startswith(("postgresql://", "postgres://")):
        return _postgres_location(text, views_path)
    if text.startswith("sqlite:"):
        text = text.split("sqlite:", 1)[1]
        text = text[2:] if text.startswith("//") else text
    path = str(Path(text).expanduser())
    return StoreLocation(
        kind="sqlite",
        env={
            "PERSISTENCE_MODULE": SQLITE_FACTORY,
            "SQLITE_DBNAME": path,
            "SQLITE_LOCK_TIMEOUT": os.environ.get("TURNLOG_SQLITE_LOCK_TIMEOUT", "30"),
            "TRANSCODER_TOPIC": TRANSCODER,
            "COMPRESSOR_TOPIC": COMPRESSOR,
        },
        views_path=views_path or path,
        display=path,
    )


def _postgres_location(url: str, views_path: str | None) -> StoreLocation:
    parsed = urlparse(url)
    dbname = parsed.path.lstrip("/")
    if not dbname:
        raise StoreError(f"the PostgreSQL URL {url!r} names no database")
    if views_path is None:
        raise StoreError("a PostgreSQL log needs a local read-model file (--views PATH or TURNLOG_VIEWS)")
    env = {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": dbname,
        "POSTGRES_HOST": unquote(parsed.hostname or "localhost"),
        "POSTGRES_PORT": str(parsed.port or 5432),
        "POSTGRES_USER": unquote(parsed.username or "postgres"),
        "POSTGRES_PASSWORD": unquote(parsed.password or ""),
        "TRANSCODER_TOPIC": TRANSCODER,
        "COMPRESSOR_TOPIC": COMPRESSOR,
    }
    return StoreLocation(kind="postgres", env=env, views_path=views_path, display=f"postgresql://{parsed.hostname}/{dbname}")


def open_application(location: StoreLocation) -> TurnlogApplication:
    """The eventsourcing application on a location that dbfile.open_location has checked (what
    its files are, decided before anything opens them)."""
    try:
        with _schema_lock(location):
            return TurnlogApplication(env=location.env)
    except Exception as e:  # the library raises a variety of driver errors on a bad store
        raise StoreError(f"cannot open {location.display}: {e}") from None


SCHEMA_LOCK_KEY = 0x7475726E6C6F67  # "turnlog": the PostgreSQL advisory lock taken while opening


@contextmanager
def _schema_lock(location: StoreLocation) -> Iterator[None]:
    """Processes opening one PostgreSQL log at once take turns: the library creates its tables
    with CREATE TABLE IF NOT EXISTS, which PostgreSQL refuses when two run at the same moment
    ("tuple concurrently updated"). SQLite serialises schema changes itself."""
    if location.kind != "postgres":
        yield
        return
    import psycopg

    env = location.env
    with psycopg.connect(dbname=env["POSTGRES_DBNAME"], host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"],
                         user=env["POSTGRES_USER"], password=env["POSTGRES_PASSWORD"] or None,
                         autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_KEY,))
