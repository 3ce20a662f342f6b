"""Background delegations as a table: one row per handle, its state and result (its queries:
delegations_views.py). It only reads the Delegation events."""

from __future__ import annotations

import sqlite3
from typing import Any

from .base import topic_of

STARTED = "turnlog:DelegationStarted"
STOPPED = "turnlog:DelegationStopped"
FINISHED = "turnlog:DelegationFinished"


class DelegationsProjection:
    name = "delegations"
    weight = 0.1  # rebuild cost relative to the others (parallel.py)
    tables = ("delegations",)
    topics = (STARTED, STOPPED, FINISHED)

    def create(self, db: sqlite3.Connection) -> None:
        db.execute(
            """CREATE TABLE IF NOT EXISTS delegations (
                handle TEXT PRIMARY KEY,
                stream TEXT NOT NULL UNIQUE,
                session_id TEXT NOT NULL,
                session_key TEXT NOT NULL,
                description TEXT NOT NULL,
                state TEXT NOT NULL,
                status TEXT,
                summary TEXT,
                stop_reason TEXT,
                started_by TEXT,
                started_at TEXT NOT NULL,
                stopped_at TEXT,
                finished_at TEXT,
                finished_by TEXT,
                wakeup_item TEXT,
                position INTEGER NOT NULL)"""
        )
        db.execute("CREATE INDEX IF NOT EXISTS delegations_by_session ON delegations (session_id, state)")

    def apply(self, db: sqlite3.Connection, event: Any, position: int) -> None:
        topic = topic_of(event)
        at = event.timestamp.isoformat()
        stream = str(event.originator_id)
        if topic == STARTED:
            db.execute("INSERT OR REPLACE INTO delegations (handle, stream, session_id, session_key, description,"
                       " state, started_by, started_at, position) VALUES (?,?,?,?,?,?,?,?,?)",
                       (event.handle, stream, event.session_id, event.session_key, event.description, "running",
                        event.actor, at, position))
        elif topic == STOPPED:
            db.execute("UPDATE delegations SET state='stopped', stop_reason=?, stopped_at=?, position=?"
                       " WHERE stream=?", (event.reason, at, position, stream))
        elif topic == FINISHED:
            db.execute("UPDATE delegations SET state='finished', status=?, summary=?, finished_at=?, finished_by=?,"
                       " wakeup_item=?, position=? WHERE stream=?",
                       (event.status, event.summary, at, event.actor, event.wakeup_item, position, stream))
