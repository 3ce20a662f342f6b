"""A rebuild of the search read model writes its rows in one large batch (one transaction, the
full-text indexes filled from the table at once); it must give exactly what the projection gave
catching up step by step and event by event: the same rows in every table and the same hits,
through edits, an erased subject, a compaction, an archived session, a Hermes import's runs,
tool calls and Chinese text found by the trigram index."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from harness.hermes_home import copy_home, fixture_home

from turnlog import EngineConfig, SessionSource, Turnlog
from turnlog.projections.search import SearchProjection

from chat import alice, echo

CAROL = SessionSource(platform="telegram", chat_type="dm", chat_id="77", user_id="77")
DAVE = SessionSource(platform="discord", chat_type="dm", chat_id="88", user_id="88")
QUERIES = ("apple", "banana", '"apple pie"', "数据库", "服务器配置", "weather", "erased", "tool")
WHATSAPP_ALIASES = str(fixture_home() / "platforms" / "whatsapp" / "session")


def source(person: SessionSource, message_id: str) -> SessionSource:
    return SessionSource(**{**person.to_dict(), "message_id": message_id})


def tables(db: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the search read model's tables (the full-text indexes as the ids they hold)."""
    conn = sqlite3.connect(db)
    try:
        out = {name: conn.execute(f"SELECT * FROM {name} ORDER BY 1").fetchall()
               for name in SearchProjection.tables if not name.endswith(("_fts", "_trigram"))}
        for index in ("search_fts", "search_fts_trigram"):
            out[index] = conn.execute(f"SELECT id, sz FROM {index}_docsize ORDER BY id").fetchall()
        return out
    finally:
        conn.close()


def hits(t: Turnlog) -> dict[str, list[dict[str, Any]]]:
    return {q: [h.to_dict() for h in t.search(q, include_undone=True, limit=100)] for q in QUERIES}


def play(t: Turnlog, clock: Any, tmp_path: Path, *, hermes_import: bool) -> str:
    """The scenario, caught up after every step (the projection's incremental path); returns
    the archived session's id."""
    # A session that is archived: its events leave the log.
    t.handle_message(source(DAVE, "d1"), "apple from an old session", echo, lambda text: None)
    t.command(source(DAVE, "d2"), "/reset")
    clock.advance(days=200)
    # A subject whose words are erased, then keeps talking in a new session.
    t.handle_message(source(CAROL, "c1"), "carol's banana secret 数据库迁移", echo, lambda text: None)
    t.maintenance.catch_up()
    old = [c.session_id for c in t.archivable(older_than="90d")]
    assert len(old) == 1
    t.archive(tmp_path / "old.tlar", older_than="90d")
    t.erase_subject("telegram:77", actor="operator", cause="erase request")
    t.handle_message(source(CAROL, "c2"), "banana again after the erase", echo, lambda text: None)
    t.maintenance.catch_up()
    if hermes_import:  # runs of messages in MessagesImported events, caught up in one batch
        t.import_hermes(copy_home(tmp_path / "home"))
        t.maintenance.catch_up()
    # Edits and a compaction, Chinese text, tool calls, each caught up as it comes.
    for i, text in enumerate(["apple pie one", "服务器配置数据库迁移，已经完成。", "apple two", "banana three",
                              "mixed 数据库 and apple", "four apples"]):
        t.handle_message(alice(f"a{i}"), text, echo, lambda text: None)
        t.maintenance.catch_up()
    session = t.get_or_create_session(alice()).session_id
    token = t.turns.acquire_lease(session, t.routing_key(alice()), timeout=1)
    t.turns.append_message(token, "assistant", "", tool_calls=[{"id": "c1", "name": "weather"}], token_count=3)
    t.turns.append_message(token, "tool", "sunny", tool_call_id="c1", name="weather")
    t.turns.release_lease(token)
    t.maintenance.catch_up()
    t.compact(session, summary="about apples", keep_turns=3)
    t.maintenance.catch_up()
    t.command(alice("u1"), "/undo")
    t.maintenance.catch_up()
    t.command(alice("r1"), "/retry")
    t.run_next(alice(), echo, lambda text: None)
    t.maintenance.catch_up()
    return old[0]


def caught_up_and_rebuilt(t: Turnlog, db: str, clock: Any, tmp_path: Path, *, hermes_import: bool
                          ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(rows, hits) as the scenario's catch-ups left them, then after a rebuild."""
    archived = play(t, clock, tmp_path, hermes_import=hermes_import)
    live_rows, live_hits = tables(db), hits(t)
    # What the scenario must have reached, or the comparison proves little.
    assert {h["fate"] for q in live_hits for h in live_hits[q]} >= {None, "compacted", "undone", "retried"}
    assert live_hits["数据库"] and live_hits["服务器配置"] and live_hits["weather"]
    assert "[erased]" in {m[5] for m in live_rows["search_messages"]}
    assert not [f for f in live_rows["search_filings"] if f[1] == archived]
    assert len(live_rows["search_fts_trigram"]) >= 2
    assert t.maintenance.rebuild(["search"])["events"] > 0
    return live_rows, live_hits, tables(db), hits(t)


def test_a_bulk_rebuild_gives_the_rows_and_hits_of_the_catch_ups(db, clock, tmp_path):
    with Turnlog(db, clock=clock, config=EngineConfig(whatsapp_aliases=WHATSAPP_ALIASES)) as t:
        live_rows, live_hits, rows, found = caught_up_and_rebuilt(t, db, clock, tmp_path, hermes_import=True)
        assert any(m[16] == "import:hermes" for m in live_rows["search_messages"])
        assert rows == live_rows
        assert found == live_hits


def test_a_bulk_rebuild_gives_what_the_projection_gives_event_by_event(db, clock, tmp_path):
    with Turnlog(db, clock=clock) as t:
        live_rows, live_hits, rows, found = caught_up_and_rebuilt(t, db, clock, tmp_path, hermes_import=False)
        assert (rows, found) == (live_rows, live_hits)
        t.maintenance.rebuild(["search"], batch=1)  # one event per batch
        assert tables(db) == live_rows
        assert hits(t) == live_hits
