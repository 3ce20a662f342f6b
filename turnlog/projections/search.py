"""The transcripts read model and their full-text index (spec §10): two FTS5 indexes over one table.

`search_messages` holds every message: what is searched (`text`: its content, tool name and tool
calls), what a search filters on (session, routing key, platform, role, time) and the message's
other fields (`content` is NULL where it equals `text`, as it does for most messages; read
coalesce(content, text)). Its rowid numbers the messages in log order (`position` is the log
position of the event that holds the message: an import's MessagesImported holds many), so a
rebuild gives every row the same id again. (The transcripts were a table of their own; keeping one copy
halves what a rebuild writes for them.)

`search_fts` (unicode61: words, ranked by bm25) indexes the whole text; `search_fts_trigram`
(trigram: substrings, for Chinese, Japanese and Korean, which have no spaces between words)
indexes only the CJK runs of it (column `cjk`). Hermes indexes everything twice; a trigram
index costs a token per character, so indexing only the text it is used for makes it (and each
message's indexing) several times cheaper, and a query it cannot answer (a term mixing scripts)
falls back to a substring scan, which finds the same messages. Both are external content tables
whose `content=` names the live table even while a rebuild fills fresh copies, so the copies are
correct the moment they are renamed into place.

The routing key and platform of a message come from its session's SessionCreated (and
SessionReopened) events, which this projection reads itself into `search_sessions`: it never
reads another projection's tables, so it rebuilds on its own.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson

from ..domain.fts_query import cjk_runs
from ..domain.transcript import MessagesImported, imported_fields
from .base import Tables, utc_iso

CREATED = "turnlog:SessionCreated"
REOPENED = "turnlog:SessionReopened"
APPENDED = "turnlog:MessageAppended"
IMPORTED = MessagesImported.TOPIC
FTS_TABLES = ("search_fts", "search_fts_trigram")


def searchable_text(e: dict[str, Any]) -> str:
    """What is indexed for a message (its fields): its content, then its tool name and tool
    calls (as Hermes)."""
    parts = [e["content"]]
    if e["name"]:
        parts.append(e["name"])
    if e["tool_calls"]:
        parts.append(orjson.dumps(e["tool_calls"]).decode())
    return "\n".join(parts)


class SearchProjection:
    name = "search"
    weight = 6.0  # rebuild cost relative to the others (parallel.py)
    # 2: the trigram index holds only CJK runs (column cjk); 3: every message field; 4: ids number
    # the messages, column position (an imported run of messages is one event)
    version = 4
    tables = ("search_fts", "search_fts_trigram", "search_messages", "search_sessions")
    retired = ("messages",)  # the transcripts table of the former `messages` projection
    topics = (CREATED, REOPENED, APPENDED, IMPORTED)

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
                text TEXT NOT NULL,
                cjk TEXT NOT NULL,
                content TEXT,
                tool_calls TEXT,
                tool_call_id TEXT,
                name TEXT,
                token_count INTEGER,
                finish_reason TEXT,
                platform_message_id TEXT,
                epoch INTEGER NOT NULL,
                turn_id TEXT NOT NULL,
                actor TEXT,
                cause TEXT,
                position INTEGER NOT NULL)"""
        )
        # content= names the live table on purpose: see the module docstring.
        t.execute("CREATE VIRTUAL TABLE IF NOT EXISTS {search_fts} USING fts5("
                  "text, content='search_messages', content_rowid='id')")
        t.execute("CREATE VIRTUAL TABLE IF NOT EXISTS {search_fts_trigram} USING fts5("
                  "cjk, content='search_messages', content_rowid='id', tokenize='trigram')")

    def create_indexes(self, t: Tables) -> None:
        t.execute("CREATE INDEX IF NOT EXISTS search_messages_by_session ON {search_messages} (session_id, id)")
        t.execute("CREATE INDEX IF NOT EXISTS search_messages_by_key ON {search_messages} (session_key, id)")

    def writer(self, t: Tables) -> "_SearchWriter":
        return _SearchWriter(t)

    def integrity(self, db: sqlite3.Connection) -> list[str]:
        """Problems in the live indexes (empty when sound): FTS5's own integrity check, and
        whether each index holds exactly the messages of the table it indexes."""
        problems = []
        # FTS5's own check is an INSERT: a read-only connection compares the indexes' rows only.
        read_only = db.execute("PRAGMA query_only").fetchone()[0]
        for table, which in (("search_fts", ""), ("search_fts_trigram", " WHERE cjk != ''")):
            try:
                if not read_only:
                    db.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
                unindexed = db.execute(f"SELECT count(*) FROM (SELECT id FROM search_messages{which} EXCEPT"
                                       f" SELECT id FROM {table}_docsize)").fetchone()[0]
                stale = db.execute(f"SELECT count(*) FROM (SELECT id FROM {table}_docsize EXCEPT"
                                   f" SELECT id FROM search_messages{which})").fetchone()[0]
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
    buffers = True  # apply() only reads; it writes in flush()

    def __init__(self, t: Tables) -> None:
        self.t = t
        self.sessions: dict[str, tuple[str | None, str | None]] = {}  # session_id -> (key, platform)
        self.new_sessions: list[tuple[Any, ...]] = []
        self.rekeyed: list[tuple[str, str]] = []  # (session_key, aggregate_id), in order
        self.rows: list[tuple[Any, ...]] = []
        self.texts: list[tuple[int, str]] = []
        self.cjk: list[tuple[int, str]] = []
        self.next_id: int | None = None  # the next message's rowid, once read from the table

    def apply_fields(self, topic: str, e: dict[str, Any], position: int) -> None:
        if topic == IMPORTED:
            for message in imported_fields(e):
                self.apply_fields(APPENDED, message, position)
        elif topic == APPENDED:
            if self.next_id is None:
                self.next_id = self.t.execute("SELECT coalesce(max(id), 0) + 1 FROM {search_messages}").fetchone()[0]
            rowid = self.next_id
            self.next_id += 1
            key, platform = self._session(e["session_id"])
            text = searchable_text(e)
            cjk = cjk_runs(text)
            content, tool_calls = e["content"], e["tool_calls"]
            self.rows.append((rowid, e["session_id"], e["originator_version"], e["role"], key, platform,
                              utc_iso(e["timestamp"]), text, cjk, None if text == content else content,
                              None if tool_calls is None else orjson.dumps(tool_calls).decode(), e["tool_call_id"],
                              e["name"], e["token_count"], e["finish_reason"], e["platform_message_id"], e["epoch"],
                              e["turn_id"], e["actor"], e["cause"], position))
            self.texts.append((rowid, text))
            if cjk:
                self.cjk.append((rowid, cjk))
        elif topic == CREATED:
            platform = (e["origin"] or {}).get("platform")
            self.new_sessions.append((e["session_id"], e["originator_id"], e["session_key"], platform))
            self.sessions[e["session_id"]] = (e["session_key"], platform)
        else:  # SessionReopened: later messages are filed under the key it now serves
            self.rekeyed.append((e["session_key"], e["originator_id"]))
            session_id = self._session_id(e["originator_id"])
            if session_id is not None:
                self.sessions[session_id] = (e["session_key"], self._session(session_id)[1])

    def _session(self, session_id: str) -> tuple[str | None, str | None]:
        found = self.sessions.get(session_id)
        if found is None:
            row = self.t.execute("SELECT session_key, platform FROM {search_sessions} WHERE session_id=?",
                                 (session_id,)).fetchone()
            found = self.sessions[session_id] = (row[0], row[1]) if row else (None, None)
        return found

    def _session_id(self, aggregate_id: str) -> str | None:
        for row in self.new_sessions:
            if row[1] == aggregate_id:
                return row[0]
        found = self.t.execute("SELECT session_id FROM {search_sessions} WHERE aggregate_id=?",
                               (aggregate_id,)).fetchone()
        return found[0] if found else None

    def flush(self) -> None:
        if self.new_sessions:
            self.t.executemany("INSERT INTO {search_sessions} VALUES (?,?,?,?)", self.new_sessions)
        if self.rekeyed:
            self.t.executemany("UPDATE {search_sessions} SET session_key=? WHERE aggregate_id=?", self.rekeyed)
        self.new_sessions, self.rekeyed = [], []
        if not self.rows:
            return
        self.t.executemany("INSERT INTO {search_messages} VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           self.rows)
        self.t.executemany("INSERT INTO {search_fts} (rowid, text) VALUES (?,?)", self.texts)
        self.t.executemany("INSERT INTO {search_fts_trigram} (rowid, cjk) VALUES (?,?)", self.cjk)
        self.rows, self.texts, self.cjk = [], [], []
