"""Issue 19 acceptance: import-hermes on generated state.db rows (random bytes and wrong types in text
columns, NULLs, huge values, odd ids) never shows a traceback; every good row is imported, every bad
one is named with its reason (skipped), every damaged cell of an imported row is named (repaired).

What is good or damaged is decided from the stored cells themselves (typeof, the bytes of the text),
not from what was generated: SQLite's column affinity converts some values on the way in."""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from harness.cli import run
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from turnlog import Turnlog
from turnlog.domain.source import check_session_id
from turnlog.errors import InvalidRequest
from turnlog.hermes.cells import MAX_EPOCH
from turnlog.hermes.schema import SCHEMA_SQL, SCHEMA_VERSION

# No shrinking by default (a failing case with big cells shrinks for minutes): SHRINK=1 to shrink one.
PHASES = tuple(Phase) if os.environ.get("SHRINK") else (Phase.explicit, Phase.reuse, Phase.generate)
LIVE_ROLES = {"user", "assistant", "tool", "system"}
SAFE_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)  # sqlite3 cannot bind surrogates
INVALID_UTF8 = st.binary(min_size=1, max_size=8).filter(lambda b: not _utf8(b))


class AsText(bytes):
    """Bytes stored as a TEXT cell (invalid UTF-8 in a text column), not as a BLOB."""


def cell(*extra: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A text column's value: text, NULL, a number, a BLOB, invalid UTF-8 stored as TEXT, a huge text."""
    return st.one_of(SAFE_TEXT, st.none(), st.integers(-(2 ** 63), 2 ** 63 - 1), st.floats(allow_nan=False),
                     st.binary(max_size=8), INVALID_UTF8.map(AsText),
                     st.just("x" * 70_000), *extra)


GOOD_ID = st.from_regex(r"2026110[1-9]_0[0-9]{5}_[0-9a-f]{8}", fullmatch=True)
ODD_ID = st.one_of(st.sampled_from(["", "   ", "../../../etc/passwd", "<script>", "a\x00b", "\x1b[2J", "C:x",
                                    "7" * 2000]), INVALID_UTF8.map(AsText), st.binary(max_size=6),
                   st.integers(0, 10))
ROLE = st.one_of(st.sampled_from(["user", "assistant", "tool", "system", "session_meta", "narrator"]),
                 INVALID_UTF8.map(AsText), st.binary(max_size=4))
TIME = st.one_of(st.floats(1.7e9, 1.8e9), st.floats(allow_nan=False), st.integers(-(2 ** 63), 2 ** 63 - 1),
                 SAFE_TEXT, st.binary(max_size=4))
COUNT = st.one_of(st.none(), st.integers(-(2 ** 63), 2 ** 63 - 1), SAFE_TEXT, st.binary(max_size=4))

SESSION = st.fixed_dictionaries({"id": st.one_of(GOOD_ID, GOOD_ID, ODD_ID), "display_name": cell(),
                                 "title": cell(), "started_at": TIME, "source": cell()})
MESSAGE = st.fixed_dictionaries({"session": st.integers(0, 7), "role": ROLE, "content": cell(),
                                 "timestamp": TIME, "token_count": COUNT, "finish_reason": cell(),
                                 "active": st.sampled_from([1, 1, 1, 0, "yes"])})


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _sql(value: Any) -> tuple[str, Any]:
    return ("CAST(? AS TEXT)", bytes(value)) if isinstance(value, AsText) else ("?", value)


def _insert(db: sqlite3.Connection, table: str, row: dict[str, Any]) -> None:
    marks, values = zip(*(_sql(v) for v in row.values()))
    db.execute(f"INSERT OR IGNORE INTO {table} ({', '.join(row)}) VALUES ({', '.join(marks)})", values)


def make_home(base: Path, sessions: list[dict[str, Any]], messages: list[dict[str, Any]]) -> Path:
    home = base / "home"
    home.mkdir()
    db = sqlite3.connect(home / "state.db")
    db.executescript(SCHEMA_SQL)
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
        db.execute(f"DROP TRIGGER {name}")  # Hermes' FTS triggers index content: not what is under test
    db.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
    for row in sessions:
        _insert(db, "sessions", {**row, "source": row["source"] if row["source"] is not None else "telegram",
                                 "started_at": row["started_at"]})
    rowids = [r[0] for r in db.execute("SELECT rowid FROM sessions")]
    for m in messages:
        row = {k: v for k, v in m.items() if k != "session"}
        if m["session"] < len(rowids):  # the session's id copied as stored (a damaged one too)
            db.execute("INSERT INTO messages (session_id, role, timestamp) SELECT id, 'user', 0 FROM sessions"
                       " WHERE rowid = ?", (rowids[m["session"]],))
        else:  # a row of no session
            db.execute("INSERT INTO messages (session_id, role, timestamp) VALUES ('no-such-session', 'user', 0)")
        message_id = db.execute("SELECT max(id) FROM messages").fetchone()[0]
        for name, value in row.items():
            mark, value = _sql(value)
            db.execute(f"UPDATE messages SET {name} = {mark} WHERE id = ?", (value, message_id))
    db.commit()
    db.close()
    return home


def stored(home: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows as SQLite holds them: each cell with its storage class and its bytes."""
    db = sqlite3.connect(home / "state.db")
    db.text_factory = bytes

    def rows(sql: str) -> list[dict[str, Any]]:
        cursor = db.execute(sql)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, r)) for r in cursor.fetchall()]
    sessions = rows("SELECT id, typeof(id) AS id_type FROM sessions")
    messages = rows("SELECT id, session_id, typeof(session_id) AS sid_type, role, typeof(role) AS role_type,"
                    " typeof(content) AS content_type, CAST(content AS BLOB) AS content_bytes,"
                    " typeof(finish_reason) AS fr_type, CAST(finish_reason AS BLOB) AS fr_bytes,"
                    " timestamp, typeof(timestamp) AS ts_type, token_count, typeof(token_count) AS tc_type,"
                    " active FROM messages")
    db.close()
    return sessions, messages


def good_id(raw: Any, kind: bytes) -> str | None:
    if kind != b"text" or not _utf8(raw):
        return None
    try:
        return check_session_id(raw.decode())
    except InvalidRequest:
        return None


def damaged(m: dict[str, Any]) -> bool:
    """A live message row with a cell the importer must repair (and name)."""
    text_bad = any(kind == b"blob" or (kind == b"text" and not _utf8(raw))
                   for kind, raw in ((m["content_type"], m["content_bytes"]), (m["fr_type"], m["fr_bytes"])))
    ts = m["timestamp"]
    time_bad = m["ts_type"] not in (b"real", b"integer") or not (0 <= ts <= MAX_EPOCH)
    count_bad = m["tc_type"] not in (b"null", b"integer") or (m["tc_type"] == b"integer" and m["token_count"] < 0)
    return text_bad or time_bad or count_bad


@settings(max_examples=40, deadline=None, phases=PHASES, derandomize=True,  # the same 40 homes every run
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(SESSION, max_size=4), st.lists(MESSAGE, max_size=8))
def test_import_hermes_on_generated_rows(sessions: list[dict[str, Any]], messages: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        home = make_home(base, sessions, messages)
        db = str(base / "t.db")
        result = run("--db", db, "import-hermes", str(home), "--json")
        assert result.exit_code == 0, result.output
        assert "Traceback" not in result.output
        report = json.loads(result.stdout)
        stored_sessions, stored_messages = stored(home)
        good = {ident for s in stored_sessions if (ident := good_id(s["id"], s["id_type"])) is not None}
        imported = {s["session_id"] for s in json.loads(run("--db", db, "sessions", "--json").stdout)}
        assert imported == good
        skipped = [s["what"] for s in report["skipped"]]
        repaired = {r["what"] for r in report["repaired"]}
        assert sum(w.startswith("session ") for w in skipped) == len(stored_sessions) - len(good)
        expected: dict[str, int] = dict.fromkeys(good, 0)
        live: dict[str, int] = {}
        for m in stored_messages:
            session_id = good_id(m["session_id"], m["sid_type"])
            what = f"message {m['id']} of session {session_id}"
            if session_id not in good:
                assert any("messages of session" in w for w in skipped), (m, skipped)
                continue
            role_ok = m["role_type"] == b"text" and _utf8(m["role"]) and m["role"].decode() in LIVE_ROLES
            inactive = m["active"] == 0  # rewound by /undo (compacted is 0): a message, hidden from the agent
            if role_ok:
                expected[session_id] += 1
                live[session_id] = live.get(session_id, 0) + (not inactive)
                if damaged(m):
                    assert what in repaired, (m, report["repaired"])
            elif not inactive and not (m["role_type"] == b"text" and m["role"] == b"session_meta"):
                assert what in skipped, (m, skipped)  # an unknown role: named
        with_messages = {sid: n for sid, n in expected.items() if n}
        assert report["messages_imported"] == sum(expected.values())
        with Turnlog(db) as t:
            for session_id, count in with_messages.items():
                assert len(t.transcript(session_id)) == count
                assert len(t.turns.agent_history(session_id)) == live[session_id]
        again = run("--db", db, "import-hermes", str(home), "--json")
        assert again.exit_code == 0 and json.loads(again.stdout)["sessions_imported"] == 0
