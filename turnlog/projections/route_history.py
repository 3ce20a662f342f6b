"""Every binding a routing key ever had, with the log positions it was valid between.

This is what makes "the routing map as of position N" one indexed query, however long the log:
the rows valid at N are those with from_position <= N < to_position.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .base import topic_of


class RouteHistoryProjection:
    name = "route_history"
    weight = 0.3  # rebuild cost relative to the others (parallel.py)
    tables = ("route_history",)
    topics = ("turnlog:RouteRegistered", "turnlog:RouteBound", "turnlog:RouteDetached")

    def create(self, db: sqlite3.Connection) -> None:
        db.execute(
            """CREATE TABLE IF NOT EXISTS route_history (
                route_id TEXT NOT NULL,
                session_key TEXT NOT NULL,
                session_id TEXT,
                reason TEXT,
                from_position INTEGER NOT NULL,
                to_position INTEGER,
                from_at TEXT NOT NULL,
                PRIMARY KEY (route_id, from_position))"""
        )
        db.execute("CREATE INDEX IF NOT EXISTS route_history_span ON route_history (from_position, to_position)")
        db.execute("CREATE INDEX IF NOT EXISTS route_history_open ON route_history (route_id, to_position)")

    def apply(self, db: sqlite3.Connection, event: Any, position: int) -> None:
        route_id = str(event.originator_id)
        topic = topic_of(event)
        if topic == "turnlog:RouteRegistered":
            # A route registered already bound (version 2) starts on its session.
            session_key, session_id = event.session_key, event.session_id
            reason = event.reason if session_id is not None else "registered"
        else:
            row = db.execute("SELECT session_key FROM route_history WHERE route_id=? AND to_position IS NULL",
                             (route_id,)).fetchone()
            session_key = row[0] if row else ""
            session_id = event.session_id if topic == "turnlog:RouteBound" else None
            reason = event.reason
            db.execute("UPDATE route_history SET to_position=? WHERE route_id=? AND to_position IS NULL",
                       (position, route_id))
        db.execute("INSERT INTO route_history VALUES (?,?,?,?,?,?,?)",
                   (route_id, session_key, session_id, reason, position, None, event.timestamp.isoformat()))
