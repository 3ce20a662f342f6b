"""Issue 19 items 11 and 12 on the fixture home.

11: Hermes' session_meta markers (content NULL; Hermes drops them before the model) never reach the
history handed to an agent, `show`, search or the viewer's transcript, and export-hermes writes
them back. 12: an imported message keeps Hermes' own time (messages.timestamp) in `show`, the
viewer, the agent's history; the audit history says when the import recorded it and when the
message happened."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone
from typing import Any

import pytest
from harness.cli import ok
from harness.hermes_home import fixture_home
from starlette.testclient import TestClient

from turnlog import EngineConfig, ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.web.app import create_app

HOME = fixture_home()
TG_DM_2 = "20261105_210210_ae4d6fdf"  # 5 rows: user, assistant, session_meta, user, assistant
IMPORTED_AT = "2026-12-01T00:00:00+00:00"
SOURCE = dict(platform="telegram", chat_type="dm", chat_id="5512345678", user_id="5512345678")


def hermes(sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(f"file:{HOME / 'state.db'}?mode=ro", uri=True)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat()


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    path = tmp_path_factory.mktemp("markers") / "t.db"
    with Turnlog(str(path), clock=ManualClock(IMPORTED_AT), session_ids=SequentialIds(),
                 config=EngineConfig(whatsapp_aliases=str(HOME / "platforms/whatsapp/session"))) as t:
        t.import_hermes(HOME)
        seen: list[Any] = []
        t.handle_message(SessionSource(**SOURCE, message_id="m-next"), "and one more?",
                         lambda history, item: seen.extend(history) or "sure", lambda text: None)
    return str(path), seen


def live_rows(session_id: str) -> list[tuple[Any, ...]]:
    return hermes("SELECT role, timestamp FROM messages WHERE session_id=? AND active=1 AND role != 'session_meta'"
                  " ORDER BY id", (session_id,))


def test_the_agent_gets_no_marker_and_each_message_at_its_own_time(imported) -> None:
    _, seen = imported
    expected = live_rows(TG_DM_2)
    assert [m.role for m in seen] == [role for role, _ in expected] + ["user"]
    assert [m.timestamp.isoformat() for m in seen[:-1]] == [iso(stamp) for _, stamp in expected]
    assert seen[-1].timestamp.isoformat() == IMPORTED_AT  # the new message: now


def test_show_has_no_marker_and_hermes_times(imported) -> None:
    db, _ = imported
    for session_id, in hermes("SELECT id FROM sessions"):
        shown = json.loads(ok("--db", db, "show", session_id, "--json").stdout)
        roles = [m["role"] for m in shown["messages"]]
        assert "session_meta" not in roles, session_id


def test_show_and_the_agent_get_hermes_times(imported) -> None:
    """Item 12 alone: the markers are left out of the comparison (item 11 is tested above)."""
    db, seen = imported
    expected = [iso(stamp) for _, stamp in live_rows(TG_DM_2)]
    shown = json.loads(ok("--db", db, "show", TG_DM_2, "--json").stdout)["messages"]
    assert [m["timestamp"] for m in shown if m["role"] != "session_meta"][:4] == expected
    assert expected[0] in ok("--db", db, "show", TG_DM_2).output
    assert [m.timestamp.isoformat() for m in seen if m.role != "session_meta"][:4] == expected


def test_the_viewer_transcript_has_no_marker_and_hermes_times(imported) -> None:
    db, _ = imported
    with TestClient(create_app(db), base_url="http://127.0.0.1") as client:
        data = client.get(f"/sessions/{TG_DM_2}?format=json").json()
        html = client.get(f"/sessions/{TG_DM_2}").text
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert [m["timestamp"] for m in data["messages"][:4]] == [iso(stamp) for _, stamp in live_rows(TG_DM_2)]
    assert "session_meta" not in html


def test_search_files_no_marker_and_keeps_hermes_times(imported) -> None:
    db, _ = imported
    hits = json.loads(ok("--db", db, "search", "reading list", "--json").stdout)
    [hit] = [h for h in hits if h["session_id"] == TG_DM_2]
    assert hit["seq"] == 1  # seqs count messages, not markers
    with Turnlog(db) as t:
        assert all(m["role"] != "session_meta" for s in t.sessions() for m in t.transcript(s.session_id))


def test_history_says_when_it_was_recorded_and_when_it_happened(imported) -> None:
    db, _ = imported
    history = json.loads(ok("--db", db, "history", TG_DM_2, "--json").stdout)
    appended = [e for e in history if e["event"] == "MessageAppended" and e["actor"] == "import:hermes"]
    assert {e["at"] for e in appended} == {IMPORTED_AT}
    assert [e["data"]["message_at"] for e in appended] == [iso(stamp) for _, stamp in live_rows(TG_DM_2)]


def test_export_hermes_writes_the_markers_back(imported, tmp_path) -> None:
    db, _ = imported
    ok("--db", db, "export-hermes", str(tmp_path / "out"))
    exported = sqlite3.connect(tmp_path / "out" / "state.db")
    sql = "SELECT id, session_id, role, content, timestamp, active FROM messages WHERE role='session_meta' ORDER BY id"
    assert exported.execute(sql).fetchall() == hermes(sql)
