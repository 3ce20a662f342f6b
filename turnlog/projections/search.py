"""The full-text index of every transcript message (spec §10): two FTS5 indexes over one table.

`search_messages` holds, per message, what is searched (its content, tool name and tool calls)
and what a search filters on: session, routing key, platform, role and time. Its rowid is the
message event's log position, so a rebuild gives every row the same id again.

`search_fts` (unicode61: words, ranked by bm25) and `search_fts_trigram` (trigram: substrings,
for Chinese, Japanese and Korean text that has no spaces between words) index it as external
content tables. Their `content=` names the live table even while a rebuild fills fresh copies,
so the copies are correct the moment they are renamed into place.

The routing key and platform of a message come from its session's SessionCreated (and
SessionReopened) events, which this projection reads itself into `search_sessions`: it never
reads another projection's tables, so it rebuilds on its own.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC
from typing import Any

import orjson

from .base import Tables, topic_of

CREATED = "turnlog:SessionCreated"
REOPENED = "turnlog:SessionReopened"
APPENDED = "turnlog:MessageAppended"
FTS_TABLES = ("search_fts", "search_fts_trigram")


def searchable_text(e: Any) -> str:
    """What is indexed for a message: its content, then its tool name and tool calls (as Hermes)."""
    parts = [e.content]
    if e.name:
        parts.append(e.name)
    if e.tool_calls:
        parts.append(orjson.dumps(e.tool_calls).decode())
    return "\n".join(parts)


def utc_text(moment: Any) -> str:
    """A fixed-width UTC ISO time, so that comparing the strings compares the times."""
    if moment.utcoffset():
        moment = moment.astimezone(UTC)
    return moment.replace(tzinfo=UTC).isoformat(timespec="microseconds")


class SearchProjection:
    name = "search"
    tables = ("search_fts", "search_fts_trigram", "search_messages", "search_sessions")
    topics = (CREATED, REOPENED, APPENDED)

    def create(self, t: Tables) -> None:
        t.execute(
            """CREATE TABLE IF NOT EXISTS {search_sessions} (
                session_id TEXT PRIMARY KEY,
                aggregate_id TEXT NOT NULL UNIQUE,
                session_key TEXT,
                platform TEXT)"""
        )
        t.execute(
            """CREATE TABLE IF NOT EXISTS {search_messages} (
                id INTEGER PRIMARY KEY,
                session_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                role TEXT NOT NULL,
                session_key TEXT,
                platform TEXT,
                at TEXT NOT NULL,
                text TEXT NOT NULL)"""
        )
        # content= names the live table on purpose: see the module docstring.
        t.execute("CREATE VIRTUAL TABLE IF NOT EXISTS {search_fts} USING fts5("
                  "text, content='search_messages', content_rowid='id')")
        t.execute("CREATE VIRTUAL TABLE IF NOT EXISTS {search_fts_trigram} USING fts5("
                  "text, content='search_messages', content_rowid='id', tokenize='trigram')")

    def create_indexes(self, t: Tables) -> None:
        t.execute("CREATE INDEX IF NOT EXISTS search_messages_by_session ON {search_messages} (session_id, id)")
        t.execute("CREATE INDEX IF NOT EXISTS search_messages_by_key ON {search_messages} (session_key, id)")

    def writer(self, t: Tables) -> "_SearchWriter":
        return _SearchWriter(t)

    def integrity(self, db: sqlite3.Connection) -> list[str]:
        """Problems in the live indexes (empty when sound): FTS5's own integrity check, and
        whether each index holds exactly the messages of the table it indexes."""
        problems = []
        for table in FTS_TABLES:
            try:
                db.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
                unindexed = db.execute(f"SELECT count(*) FROM (SELECT id FROM search_messages EXCEPT"
                                       f" SELECT id FROM {table}_docsize)").fetchone()[0]
                stale = db.execute(f"SELECT count(*) FROM (SELECT id FROM {table}_docsize EXCEPT"
                                   f" SELECT id FROM search_messages)").fetchone()[0]
            except sqlite3.DatabaseError as e:
                problems.append(f"{table}: {e}")
                continue
            if unindexed or stale:
                problems.append(f"{table}: {unindexed} messages not indexed, {stale} indexed that do not exist")
        return problems

    def salvage(self, db: sqlite3.Connection, table: str) -> None:
        """Give a damaged FTS5 table the shadow rows of an empty index, so that it can be
        dropped (FTS5 must open a table to drop it, and cannot open one whose structure record
        is garbage)."""
        if table.split("__")[0] not in FTS_TABLES:
            return
        for shadow in ("data", "idx", "docsize", "config"):
            db.execute(f"DELETE FROM [{table}_{shadow}]")
        db.execute(f"INSERT INTO [{table}_config] VALUES ('version', 4)")
        db.execute(f"INSERT INTO [{table}_data] VALUES (1, x''), (10, x'00000000000000')")


class _SearchWriter:
    def __init__(self, t: Tables) -> None:
        self.t = t
        self.sessions: dict[str, tuple[str | None, str | None]] = {}  # session_id -> (key, platform)
        self.rows: list[tuple[Any, ...]] = []
        self.texts: list[tuple[int, str]] = []

    def apply(self, e: Any, position: int) -> None:
        topic = topic_of(e)
        if topic == APPENDED:
            key, platform = self._session(e.session_id)
            text = searchable_text(e)
            self.rows.append((position, e.session_id, e.originator_version, e.role, key, platform,
                              utc_text(e.timestamp), text))
            self.texts.append((position, text))
        elif topic == CREATED:
            platform = (e.origin or {}).get("platform")
            self.t.execute("INSERT INTO {search_sessions} VALUES (?,?,?,?)",
                           (e.session_id, str(e.originator_id), e.session_key, platform))
            self.sessions[e.session_id] = (e.session_key, platform)
        else:  # SessionReopened: later messages are filed under the key it now serves
            self.t.execute("UPDATE {search_sessions} SET session_key=? WHERE aggregate_id=?",
                           (e.session_key, str(e.originator_id)))
            self.sessions.clear()

    def _session(self, session_id: str) -> tuple[str | None, str | None]:
        found = self.sessions.get(session_id)
        if found is None:
            row = self.t.execute("SELECT session_key, platform FROM {search_sessions} WHERE session_id=?",
                                 (session_id,)).fetchone()
            found = self.sessions[session_id] = (row[0], row[1]) if row else (None, None)
        return found

    def flush(self) -> None:
        if not self.rows:
            return
        self.t.executemany("INSERT INTO {search_messages} VALUES (?,?,?,?,?,?,?,?)", self.rows)
        self.t.executemany("INSERT INTO {search_fts} (rowid, text) VALUES (?,?)", self.texts)
        self.t.executemany("INSERT INTO {search_fts_trigram} (rowid, text) VALUES (?,?)", self.texts)
        self.rows, self.texts = [], []
