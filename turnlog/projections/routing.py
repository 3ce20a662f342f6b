"""The routing map (routing key -> current session) and the sessions table."""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson

from .base import topic_of


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _iso(event: Any) -> str:
    return event.timestamp.isoformat()


class RoutesProjection:
    name = "routes"
    tables = ("routes",)
    topics = ("turnlog:RouteRegistered", "turnlog:RouteBound", "turnlog:RouteDetached",
              "turnlog:RouteOriginChanged")

    def create(self, db: sqlite3.Connection) -> None:
        db.execute(
            """CREATE TABLE IF NOT EXISTS routes (
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
        db.execute("CREATE INDEX IF NOT EXISTS routes_by_key ON routes (session_key)")
        db.execute("CREATE INDEX IF NOT EXISTS routes_by_session ON routes (session_id)")

    def apply(self, db: sqlite3.Connection, event: Any, position: int) -> None:
        topic = topic_of(event)
        route_id = str(event.originator_id)
        if topic == "turnlog:RouteRegistered":
            origin = event.origin or {}
            db.execute(
                "INSERT INTO routes (route_id, session_key, session_id, platform, chat_type, origin,"
                " created_at, updated_at, bound_reason, position) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (route_id, event.session_key, None, origin.get("platform"), origin.get("chat_type"),
                 _json(event.origin), _iso(event), _iso(event), None, position),
            )
        elif topic == "turnlog:RouteBound":
            db.execute(
                "UPDATE routes SET session_id=?, bound_reason=?, updated_at=?, position=? WHERE route_id=?",
                (event.session_id, event.reason, _iso(event), position, route_id),
            )
        elif topic == "turnlog:RouteDetached":
            db.execute(
                "UPDATE routes SET session_id=NULL, bound_reason=?, updated_at=?, position=? WHERE route_id=?",
                (event.reason, _iso(event), position, route_id),
            )
        elif topic == "turnlog:RouteOriginChanged":
            db.execute(
                "UPDATE routes SET origin=?, updated_at=?, position=? WHERE route_id=?",
                (_json(event.origin), _iso(event), position, route_id),
            )


_SESSION_FLAG_UPDATES = {
    "turnlog:SessionSuspended": ("suspended=1, suspend_reason=?", lambda e: (e.reason,)),
    "turnlog:ResumePendingMarked": (
        "resume_pending=1, resume_reason=?, resume_marked_at=?", lambda e: (e.reason, _iso(e))),
    "turnlog:ResumePendingCleared": (
        "resume_pending=0, resume_reason=NULL, resume_marked_at=NULL", lambda e: ()),
    "turnlog:SessionEnded": ("ended_at=?, end_reason=?", lambda e: (_iso(e), e.reason)),
    "turnlog:SessionReopened": (
        "ended_at=NULL, end_reason=NULL, suspended=0, suspend_reason=NULL, resume_pending=0,"
        " resume_reason=NULL, resume_marked_at=NULL, session_key=?, updated_at=?",
        lambda e: (e.session_key, _iso(e))),
    "turnlog:ActivityTouched": ("updated_at=?", lambda e: (_iso(e),)),
}


class SessionsProjection:
    name = "sessions"
    tables = ("sessions",)
    topics = ("turnlog:SessionCreated", *_SESSION_FLAG_UPDATES)

    def create(self, db: sqlite3.Connection) -> None:
        db.execute(
            """CREATE TABLE IF NOT EXISTS sessions (
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
                position INTEGER NOT NULL)"""
        )
        db.execute("CREATE INDEX IF NOT EXISTS sessions_by_key ON sessions (session_key)")

    def apply(self, db: sqlite3.Connection, event: Any, position: int) -> None:
        topic = topic_of(event)
        if topic == "turnlog:SessionCreated":
            origin = event.origin or {}
            db.execute(
                "INSERT INTO sessions (session_id, aggregate_id, session_key, platform, chat_type, display_name,"
                " origin, created_at, updated_at, created_reason, previous_session_id, parent_session_id,"
                " position) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (event.session_id, str(event.originator_id), event.session_key, origin.get("platform"), origin.get("chat_type"),
                 origin.get("chat_name") or origin.get("user_name"), _json(event.origin), _iso(event),
                 _iso(event), event.reason, event.previous_session_id, event.parent_session_id, position),
            )
            return
        assignments, values = _SESSION_FLAG_UPDATES[topic]
        db.execute(
            f"UPDATE sessions SET {assignments}, position=? WHERE aggregate_id=?",
            (*values(event), position, str(event.originator_id)),
        )

