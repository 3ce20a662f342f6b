"""export-hermes (a Hermes 0.19.0 home written from the log) and the round trip import -> export ->
import; and an import SIGKILLed midway that resumes without duplicates."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from harness import procs
from harness.hermes_home import fixture_home, grown_home

from turnlog import EngineConfig, ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.cli import main

HOME = fixture_home()
LID_DIR = str(HOME / "platforms" / "whatsapp" / "session")


def rows(db_path: Path, sql: str) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def engine(path: Path) -> Turnlog:
    return Turnlog(str(path), clock=ManualClock("2026-12-01T00:00:00+00:00"), session_ids=SequentialIds(),
                   config=EngineConfig(whatsapp_aliases=LID_DIR))


def comparable(t: Turnlog) -> tuple[dict[str, Any], dict[str, str]]:
    transcripts = {
        s.session_id: (s.parent_session_id, s.end_reason, s.suspended, s.resume_pending,
                          [(m["role"], m["content"], m["tool_calls"], m["tool_call_id"], m["name"], m["finish_reason"])
                           for m in t.transcript(s.session_id)])
        for s in t.sessions()}
    return transcripts, {r.session_key: r.session_id for r in t.routes()}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    base = tmp_path_factory.mktemp("exp")
    with engine(base / "a.db") as t:
        t.import_hermes(HOME)
        result = CliRunner().invoke(main, ["--db", str(base / "a.db"), "export-hermes", str(base / "home"), "--json"])
        assert result.exit_code == 0, result.output
        yield t, base / "home", json.loads(result.output)


@pytest.mark.parametrize("sql", [
    "SELECT * FROM sessions ORDER BY id",
    "SELECT * FROM messages ORDER BY id",
    "SELECT * FROM session_model_usage ORDER BY session_id, model, task",
    "SELECT session_key, entry_json FROM gateway_routing ORDER BY session_key",
    "SELECT * FROM delivery_obligations ORDER BY obligation_id",
    "SELECT version FROM schema_version",
    "SELECT name, type FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name",
])
def test_the_exported_state_db_holds_the_fixtures_rows(exported, sql: str) -> None:
    _, home, _ = exported
    assert rows(home / "state.db", sql) == rows(HOME / "state.db", sql)


def test_the_exported_home_has_the_routing_mirror_and_the_files_keys_depend_on(exported) -> None:
    _, home, report = exported
    assert report["sessions"] == 14 and report["routes"] == 10 and report["skipped"] == []

    def entries(path: Path) -> dict[str, Any]:
        data = json.loads(path.read_text())
        data.pop("_README")
        return data
    assert entries(home / "sessions" / "sessions.json") == entries(HOME / "sessions" / "sessions.json")
    lid = Path("platforms/whatsapp/session")
    assert sorted(p.name for p in (home / lid).iterdir()) == sorted(p.name for p in (HOME / lid).iterdir())
    assert json.loads((home / ".restart_failure_counts").read_text()) == json.loads(
        (HOME / ".restart_failure_counts").read_text())
    assert json.loads((home / "gateway.json").read_text()) == json.loads((HOME / "gateway.json").read_text())
    # Hermes' own FTS index is filled, so a search in Hermes finds the exported rows
    assert rows(home / "state.db", "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'Kyoto'") == rows(
        HOME / "state.db", "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'Kyoto'")


def test_round_trip_import_export_import_gives_the_same_transcripts_and_routing(exported, tmp_path) -> None:
    t, home, _ = exported
    with engine(tmp_path / "b.db") as again:
        report = again.import_hermes(home)
        assert report.skipped == [] and report.sessions_imported == 14
        assert comparable(again) == comparable(t)


def test_what_happened_after_the_import_is_exported_too(tmp_path) -> None:
    with engine(tmp_path / "a.db") as t:
        t.import_hermes(HOME)
        origin = json.loads((HOME / "sessions" / "sessions.json").read_text())["agent:main:telegram:dm:5512345678"]
        t.handle_message(SessionSource.from_dict({**origin["origin"], "message_id": "m9"}), "再推荐一本",
                         lambda history, item: "《三体》", lambda text: None)
        t.command(SessionSource.from_dict(origin["origin"]), "/new")
        # a chat that began in turnlog
        native = SessionSource(platform="irc", chat_type="group", chat_id="#hermes", user_id="alice",
                               message_id="n1")
        t.handle_message(native, "hi from irc", lambda history, item: "hello alice", lambda text: None)
        t.export_hermes(tmp_path / "home")
        with engine(tmp_path / "b.db") as again:
            again.import_hermes(tmp_path / "home")
            assert comparable(again)[0] == comparable(t)[0]
    exported_rows = rows(tmp_path / "home" / "state.db",
                         "SELECT id, content FROM messages WHERE session_id='20261105_210210_ae4d6fdf' ORDER BY id")
    assert [c for _, c in exported_rows[-2:]] == ["再推荐一本", "《三体》"]
    assert exported_rows[-1][0] > max(r[0] for r in rows(HOME / "state.db", "SELECT id FROM messages"))
    ended = rows(tmp_path / "home" / "state.db",
                 "SELECT end_reason, message_count FROM sessions WHERE id='20261105_210210_ae4d6fdf'")
    assert ended == [("session_reset", 7)]
    [(source, key, count)] = rows(tmp_path / "home" / "state.db",
                                  "SELECT source, session_key, message_count FROM sessions WHERE source = 'irc'")
    assert (source, key, count) == ("irc", "agent:main:irc:group:#hermes:alice", 2)
    routing = json.loads((tmp_path / "home" / "sessions" / "sessions.json").read_text())
    assert routing["agent:main:irc:group:#hermes:alice"]["origin"]["chat_id"] == "#hermes"


def test_export_refuses_a_home_that_already_has_a_state_db(exported, tmp_path) -> None:
    _, home, _ = exported
    result = CliRunner().invoke(main, ["--db", str(home.parent / "a.db"), "export-hermes", str(home)])
    assert result.exit_code == 2 and "already holds a state.db" in result.output


KILLED_IMPORT = """
from pathlib import Path
t = kit.turnlog()
saves = []
def second_batch(items):
    saves.append(1)
    return len(saves) == 2
kit.kill_after_save(t, second_batch)
t.import_hermes(Path(kit.work) / "home", batch_messages=500)
"""


def test_an_import_killed_midway_resumes_without_duplicates(tmp_path) -> None:
    home = grown_home(tmp_path / "home", copies=20)  # ~2,600 messages, 294 sessions
    db = tmp_path / "t.db"
    procs.crash(db, KILLED_IMPORT, at="2026-12-01T00:00:00+00:00", work=tmp_path)
    with Turnlog(str(db), clock=ManualClock("2026-12-01T01:00:00+00:00")) as t:
        partial = {s.session_id for s in t.sessions()}
        assert 0 < len(partial) < 294  # two batches committed, not the rest
        report = t.import_hermes(home)
        assert report.sessions_already_imported == len(partial)
        assert report.sessions_imported == 294 - len(partial)
        expected = dict(rows(home / "state.db",
                             "SELECT session_id, count(*) FROM messages WHERE role != 'session_meta'"
                             " GROUP BY session_id"))
        sessions = t.sessions()
        assert len(sessions) == 294
        for s in sessions:
            seqs = [m["seq"] for m in t.transcript(s.session_id)]
            assert seqs == list(range(1, expected.get(s.session_id, 0) + 1)), s["session_id"]
        assert t.import_hermes(home).nothing_to_do
