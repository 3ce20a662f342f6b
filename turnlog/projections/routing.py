"""The routing map (routing key -> current session) and the sessions table."""

from __future__ import annotations

from typing import Any, Callable

import orjson

from ..domain.archive import SessionArchived, SessionRestored
from ..domain.session import session_stream
from .base import Rows, Tables


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


_ROUTE_COLUMNS = ("route_id", "session_key", "session_id", "platform", "chat_type", "origin", "created_at",
                  "updated_at", "bound_reason", "position")


class RoutesProjection:
    name = "routes"
    weight = 0.3  # rebuild cost relative to the others (parallel.py)
    tables = ("routes",)
    topics = ("turnlog:RouteRegistered", "turnlog:RouteBound", "turnlog:RouteDetached",
              "turnlog:RouteOriginChanged")

    def create(self, t: Tables) -> None:
        t.execute(
            """CREATE TABLE IF NOT EXISTS {routes} (
                route_id TEXT PRIMARY KEY,
                session_key TEXT NOT NULL,
                session_id TEXT,
                platform TEXT,
                chat_type TEXT,
                origin TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                bound_reason TEXT,
                position INTEGER NOT NULL)"""
        )

    def create_indexes(self, t: Tables) -> None:
        t.execute("CREATE INDEX IF NOT EXISTS routes_by_key ON {routes} (session_key)")
        t.execute("CREATE INDEX IF NOT EXISTS routes_by_session ON {routes} (session_id)")

    def writer(self, t: Tables) -> "_RoutesWriter":
        return _RoutesWriter(t)


class _RoutesWriter:
    buffers = True  # apply() only reads; it writes in flush()

    def __init__(self, t: Tables) -> None:
        self.rows = Rows(t, "routes", _ROUTE_COLUMNS, "route_id")

    def apply_fields(self, topic: str, e: dict[str, Any], position: int) -> None:
        route_id = e["originator_id"]
        at = e["timestamp"]
        if topic == "turnlog:RouteRegistered":
            origin = e["origin"] or {}
            # A route registered already bound (version 2) carries its binding.
            self.rows.new(route_id, session_key=e["session_key"], platform=origin.get("platform"),
                          chat_type=origin.get("chat_type"), origin=_json(e["origin"]), created_at=at, updated_at=at,
                          session_id=e["session_id"], bound_reason=e["reason"], position=position)
            return
        row = self.rows.get(route_id)
        if row is None:
            return
        if topic == "turnlog:RouteBound":
            row.update(session_id=e["session_id"], bound_reason=e["reason"])
        elif topic == "turnlog:RouteDetached":
            row.update(session_id=None, bound_reason=e["reason"])
        else:  # RouteOriginChanged
            row["origin"] = _json(e["origin"])
        row.update(updated_at=at, position=position)

    def flush(self) -> None:
        self.rows.flush()


def _reopened(row: dict[str, Any], e: dict[str, Any]) -> None:
    row.update(ended_at=None, end_reason=None, suspended=0, suspend_reason=None, resume_pending=0,
               resume_reason=None, resume_marked_at=None, session_key=e["session_key"], updated_at=e["timestamp"])


# How each event changes a session's row, given the event's fields (LogReader.fields).
_SESSION_CHANGES: dict[str, Callable[[dict[str, Any], dict[str, Any]], None]] = {
    "turnlog:SessionSuspended": lambda row, e: row.update(suspended=1, suspend_reason=e["reason"]),
    "turnlog:ResumePendingMarked": lambda row, e: row.update(
        resume_pending=1, resume_reason=e["reason"], resume_marked_at=e["timestamp"]),
    "turnlog:ResumePendingCleared": lambda row, e: row.update(
        resume_pending=0, resume_reason=None, resume_marked_at=None),
    "turnlog:SessionEnded": lambda row, e: row.update(ended_at=e["timestamp"], end_reason=e["reason"]),
    "turnlog:SessionReopened": _reopened,
    "turnlog:ActivityTouched": lambda row, e: row.update(updated_at=e["timestamp"]),
    "turnlog:SessionTitled": lambda row, e: row.update(title=e["title"]),
}

_SESSION_COLUMNS = ("session_id", "aggregate_id", "session_key", "platform", "chat_type", "display_name", "origin",
                    "created_at", "updated_at", "created_reason", "previous_session_id", "parent_session_id",
                    "suspended", "suspend_reason", "resume_pending", "resume_reason", "resume_marked_at",
                    "ended_at", "end_reason", "title", "position", "archive_file", "archive_sha256", "archived_at")


class SessionsProjection:
    name = "sessions"
    version = 3  # 2: the title (SessionTitled); 3: archived sessions
    weight = 0.5  # rebuild cost relative to the others (parallel.py): its topics are read for the timeline
    tables = ("sessions",)
    topics = ("turnlog:SessionCreated", *_SESSION_CHANGES, SessionArchived.TOPIC, SessionRestored.TOPIC)

    def create(self, t: Tables) -> None:
        t.execute(
            """CREATE TABLE IF NOT EXISTS {sessions} (
                session_id TEXT PRIMARY KEY,
                aggregate_id TEXT NOT NULL UNIQUE,
                session_key TEXT NOT NULL,
                platform TEXT,
                chat_type TEXT,
                display_name TEXT,
                origin TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                created_reason TEXT NOT NULL,
                previous_session_id TEXT,
                parent_session_id TEXT,
                suspended INTEGER NOT NULL DEFAULT 0,
                suspend_reason TEXT,
                resume_pending INTEGER NOT NULL DEFAULT 0,
                resume_reason TEXT,
                resume_marked_at TEXT,
                ended_at TEXT,
                end_reason TEXT,
                title TEXT,
                position INTEGER NOT NULL,
                archive_file TEXT,
                archive_sha256 TEXT,
                archived_at TEXT)"""
        )

    def create_indexes(self, t: Tables) -> None:
        t.execute("CREATE INDEX IF NOT EXISTS sessions_by_key ON {sessions} (session_key)")
        t.execute("CREATE INDEX IF NOT EXISTS sessions_by_title ON {sessions} (title) WHERE title IS NOT NULL")

    def writer(self, t: Tables) -> "_SessionsWriter":
        return _SessionsWriter(t)


class _SessionsWriter:
    buffers = True  # apply() only reads; it writes in flush()

    def __init__(self, t: Tables) -> None:
        self.rows = Rows(t, "sessions", _SESSION_COLUMNS, "aggregate_id")

    def apply_fields(self, topic: str, e: dict[str, Any], position: int) -> None:
        aggregate_id = e["originator_id"]
        if topic in (SessionArchived.TOPIC, SessionRestored.TOPIC):
            self._archive(topic, e, position)
            return
        if topic == "turnlog:SessionCreated":
            origin = e["origin"] or {}
            at = e["timestamp"]
            self.rows.new(aggregate_id, session_id=e["session_id"], session_key=e["session_key"],
                          platform=origin.get("platform"), chat_type=origin.get("chat_type"),
                          display_name=origin.get("chat_name") or origin.get("user_name"), origin=_json(e["origin"]),
                          created_at=at, updated_at=at, created_reason=e["reason"],
                          previous_session_id=e["previous_session_id"], parent_session_id=e["parent_session_id"],
                          suspended=0, resume_pending=0, position=position)
            return
        row = self.rows.get(aggregate_id)
        if row is None:
            return
        _SESSION_CHANGES[topic](row, e)
        row["position"] = position

    def _archive(self, topic: str, e: dict[str, Any], position: int) -> None:
        """An archived session stays listed, from the row its SessionArchived event carries once
        its own events have left the log; restored, it is listed as before."""
        aggregate_id = str(session_stream(e["session_id"]))
        row = self.rows.get(aggregate_id)
        if topic == SessionRestored.TOPIC:
            if row is not None:
                row.update(archive_file=None, archive_sha256=None, archived_at=None, position=position)
            return
        marks = {"archive_file": e["archive_file"], "archive_sha256": e["archive_sha256"],
                 "archived_at": e["timestamp"]}
        if row is not None:
            row.update(**marks, position=position)
            return
        kept = {name: e["row"].get(name) for name in _SESSION_COLUMNS if name not in ("aggregate_id", "position", *marks)}
        self.rows.new(aggregate_id, **kept, **marks, position=position)

    def flush(self) -> None:
        self.rows.flush()
