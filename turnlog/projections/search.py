"""The transcripts read model and their full-text index (docs/behaviour.md §10): two FTS5 indexes over one table.

`search_messages` holds every message: what is searched (`text`: its content, tool name and tool
calls), what a search filters on (its filing, role, time) and the message's other fields
(`content` is NULL where it equals `text`, as it does for most messages; read
coalesce(content, text)), so that a transcript reads one table instead of decoding the log. Its
rowid numbers the messages in log order and `position` is the log position of the event that holds
the message (an import's MessagesImported run holds many), so a rebuild gives every row the same
id again.
A message names its session, routing key and platform by a small integer, its filing
(`search_filings`: one per session and key it served), not by their text on every row.

`search_fts` (unicode61: words, ranked by bm25) indexes the whole text, an external content
table whose `content=` names the live table even while a rebuild fills fresh copies, so the
copies are correct the moment they are renamed into place. `search_fts_trigram` (trigram:
substrings, for Chinese, Japanese and Korean, which have no spaces between words) indexes only
the CJK runs of it, and keeps no copy of them (contentless): a trigram query's terms are CJK runs,
which occur in the whole text exactly where they occur in its runs, so ranking and snippets read
the text. Hermes indexes everything twice; a trigram index costs a token per character, so
indexing only the text it is used for makes it several times cheaper, and a query it cannot
answer (a term mixing scripts) falls back to a substring scan, which finds the same messages.

A message's `fate` (NULL: in the agent's history; undone, retried, compacted: domain/history.py)
comes from its session's edit events, applied in log order after the messages they cover.

The routing key and platform of a message come from its session's SessionCreated (and
SessionReopened) events, which this projection reads itself into `search_sessions`: it never
reads another projection's tables, so it rebuilds on its own.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson

from ..domain.fts_query import cjk_runs
from ..domain.history import HIDDEN
from ..domain.session import EDIT_FATES
from ..domain.transcript import MessagesImported, imported_fields
from ..storage.sql import utc_iso
from .base import Tables

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


def indexed_cjk(text: str) -> str:
    """What of a message's searchable text goes into the trigram index: its CJK runs ("" if none)."""
    return "" if text.isascii() else cjk_runs(text)  # the check is 50x cheaper than the scan


class SearchProjection:
    name = "search"
    weight = 6.0  # rebuild cost relative to the others (parallel.py)
    # 2: the trigram index holds only CJK runs (column cjk); 3: every message field;
    # 4: messages filed by a small integer (search_filings), the CJK runs only in their index;
    # 5: ids number the messages, column position (an imported run of messages is one event);
    # 6: column fate, from the sessions' edits of the agent's history
    version = 6
    tables = ("search_fts", "search_fts_trigram", "search_messages", "search_filings", "search_sessions")
    retired = ("messages",)  # the transcripts table of the former `messages` projection
    topics = (CREATED, REOPENED, APPENDED, IMPORTED, *EDIT_FATES)

    def create(self, t: Tables) -> None:
        t.execute(
            """CREATE TABLE IF NOT EXISTS {search_sessions} (
                session_id TEXT PRIMARY KEY,
                aggregate_id TEXT NOT NULL UNIQUE,
                filing INTEGER NOT NULL)"""
        )
        # A filing: a session under one routing key (a reopened session gets a new one).
        t.execute(
            """CREATE TABLE IF NOT EXISTS {search_filings} (
                id INTEGER PRIMARY KEY,
                session_id TEXT NOT NULL,
                session_key TEXT,
                platform TEXT)"""
        )
        # `cjk`: 1 if the message has CJK runs (then it is in the trigram index), else 0;
        # `stamp`: the message's time as written when that is not `at` (fixed-width UTC);
        # `turn_id`: 16 bytes when it is 32 lowercase hex digits (pack_hex), else its text.
        t.execute(
            """CREATE TABLE IF NOT EXISTS {search_messages} (
                id INTEGER PRIMARY KEY,
                filing INTEGER NOT NULL,
                seq INTEGER NOT NULL,
                role TEXT NOT NULL,
                at TEXT NOT NULL,
                text TEXT NOT NULL,
                cjk INTEGER NOT NULL,
                content TEXT,
                tool_calls TEXT,
                tool_call_id TEXT,
                name TEXT,
                token_count INTEGER,
                finish_reason TEXT,
                platform_message_id TEXT,
                epoch INTEGER NOT NULL,
                turn_id NOT NULL,
                actor TEXT,
                cause TEXT,
                stamp TEXT,
                position INTEGER NOT NULL,
                fate TEXT)"""
        )
        # content= names the live table on purpose: see the module docstring.
        t.execute("CREATE VIRTUAL TABLE IF NOT EXISTS {search_fts} USING fts5("
                  "text, content='search_messages', content_rowid='id')")
        t.execute("CREATE VIRTUAL TABLE IF NOT EXISTS {search_fts_trigram} USING fts5("
                  "cjk, content='', tokenize='trigram')")

    def create_indexes(self, t: Tables) -> None:
        t.execute("CREATE INDEX IF NOT EXISTS search_messages_by_filing ON {search_messages} (filing, id)")
        t.execute("CREATE INDEX IF NOT EXISTS search_filings_by_session ON {search_filings} (session_id)")
        t.execute("CREATE INDEX IF NOT EXISTS search_filings_by_key ON {search_filings} (session_key)")
        # Few messages have a fate: whether any is hidden is one look at this index.
        t.execute("CREATE INDEX IF NOT EXISTS search_messages_fated ON {search_messages} (fate) WHERE fate IS NOT NULL")

    def writer(self, t: Tables) -> "_SearchWriter":
        return _SearchWriter(t)

    def integrity(self, db: sqlite3.Connection) -> list[str]:
        """Problems in the live indexes (empty when sound): FTS5's own integrity check, and
        whether each index holds exactly the messages of the table it indexes."""
        problems = []
        # FTS5's own check is an INSERT: a read-only connection compares the indexes' rows only.
        read_only = db.execute("PRAGMA query_only").fetchone()[0]
        for table, which in (("search_fts", ""), ("search_fts_trigram", " WHERE cjk = 1")):
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

    def reindex(self, t: Tables) -> dict[str, int]:
        """Rebuild both full-text indexes from the rows of `search_messages`, reading no event
        (Hermes' rebuild_fts): FTS5 rebuilds the word index from its content table itself; the
        trigram index keeps no copy, so it is emptied and given each CJK message's runs again,
        by the rule the writer indexes them with. Returns the messages each index holds."""
        t.execute("INSERT INTO {search_fts} ({search_fts}) VALUES ('rebuild')")
        t.execute("INSERT INTO {search_fts_trigram} ({search_fts_trigram}) VALUES ('delete-all')")
        cjk = [(rowid, indexed_cjk(text)) for rowid, text in
               t.execute("SELECT id, text FROM {search_messages} WHERE cjk = 1")]
        t.executemany(_INSERT_TRIGRAM, cjk)
        messages = t.execute("SELECT count(*) FROM {search_messages}").fetchone()[0]
        return {"messages": messages, "cjk_messages": len(cjk)}

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
        self.filed: dict[str, int] = {}  # session_id -> its current filing
        self.filings: dict[int, tuple[str, str | None, str | None]] = {}  # this writer's: id -> its row
        self.next_filing = 0  # the next filing's id, read from the table on first use
        self.new_sessions: list[tuple[str, str, int]] = []
        self.refiled: list[tuple[int, str]] = []  # (filing, aggregate_id), in order
        self.rows: list[tuple[Any, ...]] = []
        self.cjk: list[tuple[int, str]] = []
        self.next_id = 0  # the next message's id, read from the table on first use
        self.edits: list[tuple[str, str, int, int]] = []  # (session aggregate id, fate, from_seq, upto_seq), in order

    def apply_fields(self, topic: str, e: dict[str, Any], position: int) -> None:
        if topic == IMPORTED:
            for message in imported_fields(e):
                self.apply_fields(APPENDED, message, position)
        elif topic == APPENDED:
            if not self.next_id:
                self.next_id = self.t.execute("SELECT coalesce(max(id), 0) + 1 FROM {search_messages}").fetchone()[0]
            rowid, self.next_id = self.next_id, self.next_id + 1
            text = searchable_text(e)
            cjk = indexed_cjk(text)
            content, tool_calls, stamp = e["content"], e["tool_calls"], e["timestamp"]
            at = utc_iso(stamp)
            name, tool_call_id, token_count = e["name"], e["tool_call_id"], e["token_count"]
            finish, platform_id = e["finish_reason"], e["platform_message_id"]
            self.rows.append((rowid, self._filing(e["session_id"]), e["originator_version"], e["role"], at,
                              text, 1 if cjk else 0, _NULL if text == content else content,
                              _NULL if tool_calls is None else orjson.dumps(tool_calls).decode(),
                              _NULL if tool_call_id is None else tool_call_id, _NULL if name is None else name,
                              _NULL if token_count is None else token_count, _NULL if finish is None else finish,
                              _NULL if platform_id is None else platform_id, e["epoch"], pack_hex(e["turn_id"]),
                              e["actor"], e["cause"], _NULL if stamp == at else stamp, position))
            if cjk:
                self.cjk.append((rowid, cjk))
        elif topic in EDIT_FATES:
            self.edits.append((e["originator_id"], EDIT_FATES[topic], e["from_seq"], e["upto_seq"]))
        elif topic == CREATED:
            platform = (e["origin"] or {}).get("platform")
            filing = self._new_filing(e["session_id"], e["session_key"], platform)
            self.new_sessions.append((e["session_id"], e["originator_id"], filing))
        else:  # SessionReopened: later messages are filed under the key it now serves
            session_id = self._session_id(e["originator_id"])
            if session_id is not None:
                platform = self._filing_row(self._filing(session_id))[2]
                filing = self._new_filing(session_id, e["session_key"], platform)
                self.refiled.append((filing, e["originator_id"]))

    def _new_filing(self, session_id: str, key: str | None, platform: str | None) -> int:
        if not self.next_filing:
            self.next_filing = self.t.execute("SELECT coalesce(max(id), 0) + 1 FROM {search_filings}").fetchone()[0]
        filing, self.next_filing = self.next_filing, self.next_filing + 1
        self.filings[filing] = (session_id, key, platform)
        self.filed[session_id] = filing
        return filing

    def _filing(self, session_id: str) -> int:
        found = self.filed.get(session_id)
        if found is None:
            row = self.t.execute("SELECT filing FROM {search_sessions} WHERE session_id=?", (session_id,)).fetchone() \
                or self.t.execute("SELECT max(id) FROM {search_filings} WHERE session_id=?", (session_id,)).fetchone()
            # A session whose creation the log does not hold: filed without a key or a platform.
            found = self.filed[session_id] = row[0] if row and row[0] else self._new_filing(session_id, None, None)
        return found

    def _filing_row(self, filing: int) -> tuple[str, str | None, str | None]:
        found = self.filings.get(filing)
        if found is None:
            found = tuple(self.t.execute("SELECT session_id, session_key, platform FROM {search_filings} WHERE id=?",
                                         (filing,)).fetchone())  # type: ignore[assignment]
        return found

    def _session_id(self, aggregate_id: str) -> str | None:
        for row in self.new_sessions:
            if row[1] == aggregate_id:
                return row[0]
        found = self.t.execute("SELECT session_id FROM {search_sessions} WHERE aggregate_id=?",
                               (aggregate_id,)).fetchone()
        return found[0] if found else None

    def flush(self) -> None:
        if self.filings:
            self.t.executemany("INSERT INTO {search_filings} VALUES (?,?,?,?)",
                               [(filing, *row) for filing, row in self.filings.items()])
            self.filings = {}
        if self.new_sessions:
            self.t.executemany("INSERT INTO {search_sessions} VALUES (?,?,?)", self.new_sessions)
        if self.refiled:
            self.t.executemany("UPDATE {search_sessions} SET filing=? WHERE aggregate_id=?", self.refiled)
        self.new_sessions, self.refiled = [], []
        if self.rows:
            self._insert_rows()
        # After the rows: an edit covers messages written before it, maybe in this same batch.
        for aggregate_id, fate, from_seq, upto_seq in self.edits:
            session_id = self._session_id(aggregate_id)
            if session_id is not None:  # the same rule as domain/history.py fate_of: a hidden fate stays
                self.t.execute("UPDATE {search_messages} SET fate=? WHERE filing IN (SELECT id FROM {search_filings}"
                               " WHERE session_id=?) AND seq BETWEEN ? AND ? AND (fate IS NULL OR fate NOT IN (?,?))",
                               (fate, session_id, from_seq, upto_seq, *HIDDEN))
        self.edits = []

    def _insert_rows(self) -> None:
        self.t.executemany(_INSERT_MESSAGES, self.rows)
        # The batch's rows are the table's last (ids number messages in log order): indexed from the table,
        # without passing each text from Python to SQLite again.
        self.t.execute("INSERT INTO {search_fts} (rowid, text) SELECT id, text FROM {search_messages} WHERE id >= ?",
                       (self.rows[0][0],))
        self.t.executemany(_INSERT_TRIGRAM, self.cjk)
        self.rows, self.cjk = [], []


# What the optional columns of a message (NULL in most) are bound as: SQLite stores a NaN as NULL,
# and the sqlite3 module binds a float directly but None through an adapter lookup, which cost
# more than the rest of the row.
_NULL = float("nan")
_INSERT_TRIGRAM = "INSERT INTO {search_fts_trigram} (rowid, cjk) VALUES (?,?)"
_INSERT_MESSAGES = "INSERT INTO {search_messages} VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,NULL)"


def pack_hex(text: Any) -> Any:
    """32 lowercase hex digits (a uuid's hex, as turn ids are) as their 16 bytes; anything else as it is."""
    if type(text) is str and len(text) == 32:
        try:
            packed = bytes.fromhex(text)
        except ValueError:
            return text
        if packed.hex() == text:
            return packed
    return text


def unpack_hex(value: Any) -> Any:
    return value.hex() if type(value) is bytes else value
