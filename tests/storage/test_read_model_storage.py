"""The compact read models: transcripts are read from the search projection's message table and,
past its position, from the log (projections/search_views.py): always exactly what the log holds,
at any version, with the read models behind, caught up, of an older shape, or opened read-only.
Tables of an older version's shape (search 3, timeline 2) are refilled in the new one."""

from __future__ import annotations

import sqlite3

from turnlog import SequentialIds, SessionSource, Turnlog
from turnlog.domain.transcript import transcript_id
from turnlog.projections.views import message_row

from chat import ALICE

SLACK = SessionSource(platform="slack", chat_type="channel", chat_id="C1", user_id="U1", scope_id="T1")


def logged(t: Turnlog, session_id: str, upto: int | None = None) -> list[dict]:
    """The transcript as the message events in the log hold it (these sessions' histories are
    never edited: every message's fate is None)."""
    return [{**message_row(e), "fate": None} for e in t._app.events.get(transcript_id(session_id), lte=upto)]


def converse(t: Turnlog, clock, source: SessionSource, texts: list[str]) -> tuple[str, list[int]]:
    session_id = t.get_or_create_session(source).session_id
    token = t.turns.acquire_lease(session_id, t.routing_key(source), timeout=1)
    positions = []
    for n, text in enumerate(texts):
        clock.advance(seconds=1.25 + n)  # some times with microseconds, some without
        if n % 3 == 1:
            record = t.turns.append_message(token, "assistant", text, tool_calls=[{"id": f"c{n}", "name": "lookup"}],
                                      token_count=7, finish_reason="tool_calls")
        elif n % 3 == 2:
            record = t.turns.append_message(token, "tool", text, tool_call_id=f"c{n - 1}", name="lookup")
        else:
            record = t.turns.append_message(token, "user", text, platform_message_id=f"m{n}")
        positions.append(record.position)
    t.turns.release_lease(token)
    return session_id, positions


def test_a_transcript_is_the_logs_whether_the_read_models_are_behind_or_caught_up(db, clock):
    with Turnlog(db, clock=clock, session_ids=SequentialIds()) as t:
        session_id, _ = converse(t, clock, ALICE, ["hello", "looking it up 天气", "sunny"])
        assert t.transcript(session_id) == logged(t, session_id)  # read models behind
        t.maintenance.catch_up()
        assert t.transcript(session_id) == logged(t, session_id)
        _, positions = converse(t, clock, ALICE, ["and tomorrow?", "checking again", "rain"])
        # The first three from the read model, the rest from the log.
        assert t.transcript(session_id) == logged(t, session_id)
        assert len(t.transcript(session_id)) == 6
        t.maintenance.catch_up()
        full = t.transcript(session_id)
        assert full == logged(t, session_id)
        # At each message's position (time travel), the transcript up to that message.
        for n, position in enumerate(positions, start=4):
            assert t.at(f"#{position}").transcript(session_id) == full[:n]


def test_messages_after_a_session_moves_to_another_key_are_found_under_that_key(db, clock):
    with Turnlog(db, clock=clock, session_ids=SequentialIds()) as t:
        moved, _ = converse(t, clock, SLACK, ["kiwi before the move"])
        t.get_or_create_session(ALICE)
        t.switch_session(ALICE, moved, force=True)
        converse(t, clock, ALICE, ["kiwi after the move"])
        slack_key, alice_key = t.routing_key(SLACK), t.routing_key(ALICE)

        hits = t.search("kiwi")
        assert [(h.session_id, h.session_key, h.platform) for h in hits] == [
            (moved, alice_key, "slack"), (moved, slack_key, "slack")]
        assert [h.snippet for h in t.search("kiwi", key=alice_key)] == [">>>kiwi<<< after the move"]
        assert [h.snippet for h in t.search("kiwi", key=slack_key)] == [">>>kiwi<<< before the move"]
        assert len(t.search("kiwi", session=moved, platform="slack")) == 2
        assert t.transcript(moved) == logged(t, moved)


# The search projection's tables as version 3 made them (every message field, key and platform
# as text on every row, the CJK runs stored for the trigram index).
V3_TABLES = [
    "CREATE TABLE search_sessions (session_id TEXT PRIMARY KEY, aggregate_id TEXT NOT NULL UNIQUE,"
    " session_key TEXT, platform TEXT)",
    "CREATE TABLE search_messages (id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seq INTEGER NOT NULL,"
    " role TEXT NOT NULL, session_key TEXT, platform TEXT, at TEXT NOT NULL, text TEXT NOT NULL, cjk TEXT NOT NULL,"
    " content TEXT, tool_calls TEXT, tool_call_id TEXT, name TEXT, token_count INTEGER, finish_reason TEXT,"
    " platform_message_id TEXT, epoch INTEGER NOT NULL, turn_id TEXT NOT NULL, actor TEXT, cause TEXT)",
    "CREATE VIRTUAL TABLE search_fts USING fts5(text, content='search_messages', content_rowid='id')",
    "CREATE VIRTUAL TABLE search_fts_trigram USING fts5(cjk, content='search_messages', content_rowid='id',"
    " tokenize='trigram')",
    "CREATE INDEX search_messages_by_session ON search_messages (session_id, id)",
    "CREATE INDEX search_messages_by_key ON search_messages (session_key, id)",
]


def make_version_3(db: str) -> None:
    """Replace the search tables by empty ones of version 3's shape, marked caught up."""
    conn = sqlite3.connect(db)
    for table in ("search_fts", "search_fts_trigram", "search_messages", "search_filings", "search_sessions"):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    for sql in V3_TABLES:
        conn.execute(sql)
    conn.execute("UPDATE projection_versions SET version=3 WHERE name='search'")
    conn.execute("UPDATE projection_positions SET position=(SELECT max(rowid) FROM stored_events)"
                 " WHERE name='search'")
    conn.commit()
    conn.close()


def test_a_database_with_version_3_search_tables_reads_the_log_and_is_refilled(db, clock):
    with Turnlog(db, clock=clock, session_ids=SequentialIds()) as t:
        session_id, _ = converse(t, clock, ALICE, ["kiwi one", "kiwi two 天气预报", "three"])
        t.maintenance.catch_up()
        expected = t.transcript(session_id)
        found = t.search("kiwi")
        found_cjk = t.search("天气预报")
    make_version_3(db)

    with Turnlog(db, read_only=True) as t:  # cannot refill: transcripts come from the log
        assert t.transcript(session_id) == expected
    with Turnlog(db, clock=clock) as t:  # refills the search tables in the new shape
        assert t.transcript(session_id) == expected
        assert t.search("kiwi") == found
        assert t.search("天气预报") == found_cjk
        assert t.maintenance.verify(["search"])["ok"]


def test_a_database_with_version_2_timeline_tables_is_refilled(db, clock):
    with Turnlog(db, clock=clock, session_ids=SequentialIds()) as t:
        session_id, _ = converse(t, clock, ALICE, ["hello", "checking", "done"])
        t.maintenance.catch_up()
        history = t.history(session_id)
        key_history = t.history(ALICE)
    conn = sqlite3.connect(db)
    for table in ("timeline_streams", "timeline_filings"):
        conn.execute(f"DROP TABLE {table}")
    # Version 2's stream table: kind, session, route and key spelled out on every row.
    conn.execute("CREATE TABLE timeline_streams (stream TEXT PRIMARY KEY, kind TEXT NOT NULL,"
                 " first_position INTEGER NOT NULL, session_id TEXT, route_id TEXT, session_key TEXT)")
    conn.execute("UPDATE projection_versions SET version=2 WHERE name='timeline'")
    conn.commit()
    conn.close()

    with Turnlog(db, clock=clock) as t:
        assert t.history(session_id) == history
        assert t.history(ALICE) == key_history
        assert t.maintenance.verify(["timeline"])["ok"]
