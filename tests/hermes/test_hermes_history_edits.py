"""Hermes' /undo and in-place compaction as turnlog's own history edits: the fixture's Weixin
rewind imports as TurnsUndone and its Feishu compaction as TranscriptCompacted (the rows are
transcript messages, the agent sees what Hermes replays); edits made in turnlog export as Hermes
stores them (flags, summary rows, message_count, rewind_count), and the export imports back to
the same history for the agent."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from harness.hermes_home import copy_home, fixture_home
from harness.history_edits import CAROL, FEISHU, TG_DM_2, WEIXIN, compact, edited_in_turnlog, say, undo

from turnlog import EngineConfig, ManualClock, SequentialIds, Turnlog

HOME = fixture_home()
LID_DIR = str(HOME / "platforms" / "whatsapp" / "session")


def engine(path: Path) -> Turnlog:
    return Turnlog(str(path), clock=ManualClock("2026-12-01T00:00:00+00:00"), session_ids=SequentialIds(),
                   config=EngineConfig(whatsapp_aliases=LID_DIR))


def hermes_rows(db: Path, session_id: str) -> list[dict[str, Any]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute("SELECT * FROM messages WHERE session_id=? ORDER BY id", (session_id,))]
    finally:
        con.close()


def session_row(db: Path, session_id: str) -> dict[str, Any]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    try:
        return dict(con.execute("SELECT * FROM sessions WHERE id=?", (session_id,)).fetchone())
    finally:
        con.close()


def edits(t: Turnlog, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e.event, {k: e.data[k] for k in ("from_seq", "upto_seq", "turns", "summary") if k in e.data}
             | {"actor": e.actor})
            for e in t.history(session_id) if e.event in ("TurnsUndone", "TurnRetried", "TranscriptCompacted")]


def said(messages: Any) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    with engine(tmp_path_factory.mktemp("edits") / "t.db") as t:
        report = t.import_hermes(HOME)
        yield t, report


def test_the_weixin_undo_is_a_turns_undone_event_and_its_rows_leave_the_agents_history(imported) -> None:
    t, report = imported
    rows = [r for r in hermes_rows(HOME / "state.db", WEIXIN) if r["role"] != "session_meta"]
    assert [(r["active"], r["compacted"]) for r in rows[2:4]] == [(0, 0), (0, 0)]  # FIXTURE.md scenario 8
    assert edits(t, WEIXIN) == [("TurnsUndone", {"from_seq": 3, "upto_seq": 4, "turns": 1, "actor": "import:hermes"})]
    assert [m["content"] for m in t.transcript(WEIXIN)] == [r["content"] for r in rows]  # nothing left out
    assert said(t.turns.agent_history(WEIXIN)) == [(r["role"], r["content"]) for r in rows if r["active"]]
    assert "再短一点" not in [m.content for m in t.turns.agent_history(WEIXIN)]
    assert report.undone_rows == 2


def test_the_feishu_compaction_is_a_transcript_compacted_event_over_the_archived_rows(imported) -> None:
    t, report = imported
    rows = [r for r in hermes_rows(HOME / "state.db", FEISHU) if r["role"] != "session_meta"]
    archived = [r for r in rows if r["compacted"]]
    assert len(archived) == 10 and rows[:10] == archived  # FIXTURE.md scenario 7: then the compacted set
    # Hermes wrote the summary (merged into a kept message) as rows after the range: the event holds none
    assert edits(t, FEISHU) == [("TranscriptCompacted", {"from_seq": 1, "upto_seq": 10, "summary": [],
                                                         "actor": "import:hermes"})]
    history = t.turns.agent_history(FEISHU)
    assert said(history) == [(r["role"], r["content"] or "") for r in rows[10:]]
    assert [m.originator_version for m in history] == list(range(11, 21))
    assert "COMPACTION SUMMARY BELOW" in history[3].content and history[3].tool_calls
    assert [m["content"] for m in t.transcript(FEISHU)][:10] == [r["content"] or "" for r in archived]
    assert report.compacted_rows == 10


def test_the_compacted_text_is_found_and_flagged_and_the_undone_text_is_not(imported) -> None:
    t, _ = imported
    hits = t.search("短信服务商", session=FEISHU)
    assert sorted((h.seq, h.fate) for h in hits) == [(5, "compacted"), (6, "compacted"), (14, None)]  # 6: its tool call
    assert t.search("再短一点", session=WEIXIN) == []


def test_a_new_turn_after_the_import_answers_from_hermes_live_history(imported) -> None:
    t, _ = imported
    seen: list[list[tuple[str, str]]] = []

    def responder(history: Any, item: Any) -> str:
        seen.append(said(history))
        return "好的"
    weixin = t.session(WEIXIN)
    t.handle_message(_source(weixin.origin), "谢谢", responder, lambda *a: None)
    assert "再短一点" not in [content for _, content in seen[0]]
    assert seen[0][-1] == ("user", "谢谢") and len(seen[0]) == 5


def _source(origin: dict[str, Any]) -> Any:
    from turnlog import SessionSource
    return SessionSource.from_dict(origin)


@pytest.fixture(scope="module")
def edited(tmp_path_factory):
    base = tmp_path_factory.mktemp("edited")
    with engine(base / "t.db") as t:
        t.import_hermes(HOME)
        edited_in_turnlog(t)
        t.export_hermes(base / "home")
        yield t, base / "home" / "state.db"


def test_edits_made_in_turnlog_export_with_hermes_flags_and_counts(edited) -> None:
    t, db = edited
    carol = t.session(CAROL).session_id
    rows = hermes_rows(db, carol)
    flags = [(r["content"].split()[-1] if r["role"] == "user" else r["role"], r["active"], r["compacted"])
             for r in rows if not r["content"].startswith("[CONTEXT COMPACTION")]
    assert [f for f in flags if f[0] in ("aardvark", "capybara", "dugong", "echidna", "fossa")] == [
        ("aardvark", 0, 1), ("capybara", 0, 0), ("dugong", 0, 1), ("echidna", 1, 0), ("fossa", 0, 0)]
    summary = [r for r in rows if r["content"].startswith("[CONTEXT COMPACTION")]
    assert [(r["active"], r["compacted"]) for r in summary] == [(1, 0)]
    live = [r for r in rows if r["active"]]
    assert live[0] == summary[0] and [r["id"] for r in rows] == sorted(r["id"] for r in rows)
    # Hermes: the live set at the compaction (summary + echidna's turn), then fossa's turn; /undo
    # lowers no count and is counted in rewind_count
    row = session_row(db, carol)
    assert (row["message_count"], row["tool_call_count"], row["rewind_count"]) == (5, 0, 2)
    # an imported session: the kept turn's rows come after the summary, under new ids
    feishu = hermes_rows(db, FEISHU)
    summaries = [r for r in feishu if r["content"] and r["content"].startswith("[CONTEXT COMPACTION")]
    assert [(r["active"], r["compacted"]) for r in summaries] == [(1, 0)]
    assert [r["content"] for r in feishu if r["active"]][1:] == [
        "最后再加一条：下周三前完成会员体系评审", "已加入「下周计划」：下周三前完成会员体系评审 📅。"]
    assert all(r["id"] > summaries[0]["id"] for r in feishu if r["active"] and r is not summaries[0])
    assert session_row(db, FEISHU)["message_count"] == 3
    assert session_row(db, TG_DM_2)["rewind_count"] == 1  # Hermes' row had 0


def test_the_export_imports_back_to_the_same_history_for_the_agent(edited, tmp_path) -> None:
    t, db = edited
    with engine(tmp_path / "again.db") as again:
        report = again.import_hermes(db.parent)
        assert report.skipped == [] and report.repaired == []
        for s in t.sessions():
            assert said(again.turns.agent_history(s.session_id)) == said(t.turns.agent_history(s.session_id)), \
                s.session_id
            assert len(again.transcript(s.session_id)) >= len(t.transcript(s.session_id))


def test_an_undo_and_a_compaction_of_a_session_born_in_turnlog_order_its_rows_by_id(tmp_path) -> None:
    with engine(tmp_path / "t.db") as t:
        for word in ("one", "two", "three"):
            say(t, CAROL, f"turn {word}")
        session_id = t.session(CAROL).session_id
        compact(t, session_id, keep_turns=1)
        say(t, CAROL, "turn four")
        compact(t, session_id, keep_turns=1)  # a second one: the first summary archived with its range
        undo(t, session_id)
        t.export_hermes(tmp_path / "home")
        rows = hermes_rows(tmp_path / "home" / "state.db", session_id)
    assert [(r["role"], r["content"][:22], r["active"], r["compacted"]) for r in rows] == [
        ("user", "turn one", 0, 1), ("assistant", "re: turn one", 0, 1), ("user", "turn two", 0, 1),
        ("assistant", "re: turn two", 0, 1), ("user", "[CONTEXT COMPACTION — ", 0, 1),
        ("user", "turn three", 0, 1), ("assistant", "re: turn three", 0, 1),
        ("user", "[CONTEXT COMPACTION — ", 1, 0), ("user", "turn four", 0, 0), ("assistant", "re: turn four", 0, 0)]


def test_an_undo_below_hermes_compaction_is_recorded_before_it_and_a_live_row_among_archived_ones_is_named(
        tmp_path) -> None:
    home = copy_home(tmp_path / "home")
    con = sqlite3.connect(home / "state.db")
    with con:
        # Feishu: the sms question rewound before the compaction (45-47), and one archived row left live (48)
        con.execute("UPDATE messages SET compacted = 0 WHERE id IN (45, 46, 47)")
        con.execute("UPDATE messages SET active = 1, compacted = 0 WHERE id = 48")
    con.close()
    with engine(tmp_path / "t.db") as t:
        report = t.import_hermes(home)
        assert edits(t, FEISHU) == [
            ("TurnsUndone", {"from_seq": 5, "upto_seq": 7, "turns": 1, "actor": "import:hermes"}),
            ("TranscriptCompacted", {"from_seq": 1, "upto_seq": 10, "summary": [], "actor": "import:hermes"})]
        assert {"what": f"messages 8 of session {FEISHU}",
                "reason": "live rows among compacted ones: read as compacted"} in report.repaired
        assert [m.originator_version for m in t.turns.agent_history(FEISHU)] == list(range(11, 21))
        t.export_hermes(tmp_path / "out")
    flags = {r["id"]: (r["active"], r["compacted"]) for r in hermes_rows(tmp_path / "out" / "state.db", FEISHU)}
    assert [flags[i] for i in (44, 45, 46, 47, 48, 49)] == [(0, 1), (0, 0), (0, 0), (0, 0), (0, 1), (0, 1)]


def test_a_rebuild_one_event_per_batch_keeps_the_compacted_fates(tmp_path) -> None:
    """A batch boundary may fall anywhere in an import's transaction: the compaction's fate still
    reaches the messages it covers (they are in the log before the edit that covers them)."""
    with engine(tmp_path / "t.db") as t:
        t.import_hermes(HOME)
        whole = sorted((h.seq, h.fate) for h in t.search("短信服务商", session=FEISHU))
        t.maintenance.rebuild(["search"], batch=1, workers=1)
        assert sorted((h.seq, h.fate) for h in t.search("短信服务商", session=FEISHU)) == whole
        assert whole == [(5, "compacted"), (6, "compacted"), (14, None)]
