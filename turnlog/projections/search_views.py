"""Transcripts read from the search projection's message table (search.py), which holds every
field of each message: one indexed query a transcript instead of decoding each message's event.
The table covers the log up to the projection's position; Views.transcript reads the rest (a
stream's messages after the last one here) from the log, so a transcript is always current."""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson

from .runner import VERSIONS_TABLE
from .search import SearchProjection, unpack_hex

_UNBOUNDED = 2**62
_SELECT = ("SELECT seq, role, coalesce(content, text), tool_calls, tool_call_id, name, token_count, finish_reason,"
           " platform_message_id, coalesce(stamp, at), epoch, turn_id, actor, cause, fate FROM search_messages"
           " WHERE filing IN (SELECT id FROM search_filings WHERE session_id=?) AND seq <= ? ORDER BY seq")
_loads = orjson.loads


def holds_transcripts(db: sqlite3.Connection) -> bool:
    """Whether the live search tables are this version's (a read-only open may find an older one)."""
    try:
        row = db.execute(f"SELECT version FROM {VERSIONS_TABLE} WHERE name=?", (SearchProjection.name,)).fetchone()
    except sqlite3.DatabaseError:
        return False
    return bool(row) and row[0] == SearchProjection.version


_KEYS = ("seq", "role", "content", "tool_calls", "tool_call_id", "name", "token_count", "finish_reason",
         "platform_message_id", "timestamp", "epoch", "turn_id", "actor", "cause", "fate")


def messages(db: sqlite3.Connection, session_id: str, upto_version: int | None = None) -> list[dict[str, Any]]:
    """The session's messages in the table (seq <= upto_version), as Views.transcript shows them."""
    rows = db.execute(_SELECT, (session_id, _UNBOUNDED if upto_version is None else upto_version)).fetchall()
    out = [dict(zip(_KEYS, row)) for row in rows]
    for message in out:
        if message["tool_calls"] is not None:
            message["tool_calls"] = _loads(message["tool_calls"])
        message["turn_id"] = unpack_hex(message["turn_id"])
    return out
