"""Reads of the delegations table (delegations.py), as typed rows."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from .base import TypedRow


@dataclass(frozen=True)
class DelegationRow(TypedRow):
    """A background delegation: the session (and routing key) that started it, its state
    (running, stopped, finished), and once finished its status, summary and wake-up item."""
    handle: str
    session_id: str
    session_key: str
    description: str
    state: str
    status: str | None
    summary: str | None
    stop_reason: str | None
    started_by: str | None
    started_at: str
    stopped_at: str | None
    finished_at: str | None
    finished_by: str | None
    wakeup_item: str | None


_COLUMNS = ", ".join(f.name for f in DelegationRow.__dataclass_fields__.values())


def delegations(db: sqlite3.Connection, session_id: str | None = None, state: str | None = None) -> list[DelegationRow]:
    """Oldest first; only one session's, or those in one state, when asked."""
    where, args = [], []
    if session_id is not None:
        where.append("session_id=?")
        args.append(session_id)
    if state is not None:
        where.append("state=?")
        args.append(state)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    rows = db.execute(f"SELECT {_COLUMNS} FROM delegations{clause} ORDER BY started_at, rowid", args).fetchall()
    return [DelegationRow(*r) for r in rows]
