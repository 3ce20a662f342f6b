"""import-hermes on the real Hermes 0.19.0 home of ../shared/fixtures (FIXTURE.md): every session,
message row, routing key, lineage, end reason and flag; then routing, search, history and time
travel over what was imported. Expected values are read from the fixture's own state.db and
sessions.json with plain sqlite3/json, not through the importer."""

from __future__ import annotations

import os

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from harness.hermes_home import copy_home, fixture_home

from turnlog import EngineConfig, ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.cli import main

HOME = fixture_home()
LID_DIR = str(HOME / "platforms" / "whatsapp" / "session")
LABELS = {  # FIXTURE.md's table
    "tg_dm_1": "20261102_081406_29be5d21", "tg_grp_mei": "20261103_120013_9d8ad616",
    "tg_grp_ravi_parent": "20261103_130500_875d257a", "tg_dm_2": "20261105_210210_ae4d6fdf",
    "whatsapp_dm": "20261106_201100_2da62b05", "feishu_group": "20261107_100001_5330a25f",
    "tg_grp_ravi_child": "20261110_183000_9ea972", "discord_thread": "20261112_164504_50039fe7",
    "slack_thread": "20261114_093001_d6c69c92", "slack_dm": "20261116_170500_347dfac9",
    "weixin_dm": "20261118_190001_079d16b1", "email_1": "20261119_150001_85d44809",
    "cli": "20261120_220000_348029", "email_2": "20261121_100501_65f050a7",
}


def hermes_rows(sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    db = sqlite3.connect(f"file:{HOME / 'state.db'}?mode=ro", uri=True)
    try:
        cursor = db.execute(sql, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, r)) for r in cursor.fetchall()]
    finally:
        db.close()


def hermes_routing() -> dict[str, dict[str, Any]]:
    data = json.loads((HOME / "sessions" / "sessions.json").read_text())
    return {k: v for k, v in data.items() if not k.startswith("_")}


def open_engine(path: Path, clock: ManualClock | None = None) -> Turnlog:
    return Turnlog(str(path), clock=clock or ManualClock("2026-12-01T00:00:00+00:00"), session_ids=SequentialIds(),
                   config=EngineConfig(whatsapp_aliases=LID_DIR))


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    path = tmp_path_factory.mktemp("imp") / "t.db"
    t = open_engine(path)
    report = t.import_hermes(HOME)
    yield t, report
    t.close()


def test_the_report_counts_everything_and_skips_nothing(imported) -> None:
    _, report = imported
    total = hermes_rows("SELECT count(*) AS n FROM messages")[0]["n"]
    assert (report.sessions_found, report.sessions_imported) == (14, 14)
    # FIXTURE.md: 13 inactive rows (2 undone, 11 compacted, one of them a session_meta marker); 12 markers
    assert (report.messages_imported, report.marker_rows_kept) == (total - 12, 12)
    assert (report.undone_rows, report.compacted_rows, report.inactive_rows_kept) == (2, 10, 0)
    assert report.routes_imported == len(hermes_routing()) == 10
    assert report.skipped == []
    assert (report.suspended, report.resume_pending, report.ledger_rows, report.restart_counts) == (1, 1, 6, 1)
    assert report.reset["reset_by_platform"]["email"]["mode"] == "idle"


@pytest.mark.parametrize("label", list(LABELS))
def test_each_fixture_session_is_imported_with_every_row(imported, label: str) -> None:
    t, _ = imported
    session_id = LABELS[label]
    row = hermes_rows("SELECT * FROM sessions WHERE id=?", (session_id,))[0]
    session = t.session(session_id)
    assert session.parent_session_id == row["parent_session_id"]
    assert session.end_reason == row["end_reason"]
    assert (session.ended_at is not None) == (row["end_reason"] is not None)
    assert session.session_key in (row["session_key"] or "", _scoped(row))
    if row["origin_json"]:
        assert session.origin == json.loads(row["origin_json"])
    # the transcript: every message row (undone and compacted ones too: their fates are events), in id order
    expected = hermes_rows("SELECT * FROM messages WHERE session_id=? AND role != 'session_meta' ORDER BY id",
                           (session_id,))
    got = t.transcript(session_id)
    assert len(got) == len(expected) > 0
    for seq, (m, e) in enumerate(zip(got, expected), start=1):
        assert m["seq"] == seq
        assert (m["role"], m["content"]) == (e["role"], e["content"] or "")
        assert m["tool_calls"] == (json.loads(e["tool_calls"]) if e["tool_calls"] else None)
        assert (m["tool_call_id"], m["name"], m["finish_reason"]) == (e["tool_call_id"], e["tool_name"],
                                                                      e["finish_reason"])
        assert m["turn_id"] == f"hermes:{e['id']}"
    # the agent's history: the active rows, as Hermes replays them
    live = [m for m in expected if m["active"] == 1]
    assert [(m.role, m.content) for m in t.turns.agent_history(session_id)] == [
        (e["role"], e["content"] or "") for e in live]
    # markers (an inactive one too): kept whole in the import record, flags and all
    [record] = [e.data for e in t.history(session_id) if e.event == "HermesSessionImported"]
    assert record["inactive_rows"] == []
    markers = hermes_rows("SELECT * FROM messages WHERE session_id=? AND role='session_meta' ORDER BY id",
                          (session_id,))
    assert record["marker_rows"] == [{k: v for k, v in r.items() if v is not None and k != "session_id"}
                                     for r in markers]
    assert record["message_ids"] == [e["id"] for e in expected]
    assert record["row"]["title"] == row["title"] if row["title"] else "title" not in record["row"]


def _scoped(row: dict[str, Any]) -> str:
    origin = json.loads(row["origin_json"]) if row["origin_json"] else {}
    if origin.get("platform") == "slack" and origin.get("scope_id") and row["session_key"]:
        head, tail = row["session_key"].split(f":{origin['chat_type']}:", 1)
        return f"{head}:{origin['chat_type']}:{origin['scope_id']}:{tail}"
    return row["session_key"] or ""


def test_every_routing_key_points_at_the_fixtures_session(imported) -> None:
    t, report = imported
    routes = {r.session_key: r.session_id for r in t.routes()}
    for key, entry in hermes_routing().items():
        scoped = _scoped({"session_key": key, "origin_json": json.dumps(entry["origin"])})
        assert routes[scoped] == entry["session_id"], key
    assert len(routes) == 10
    # The Slack thread's origin names its workspace: it moved to the workspace key (docs/behaviour.md §12 rule 1).
    assert report.routes_rekeyed == [{
        "hermes_key": "agent:main:slack:group:C07QWERTY12:1794648600.412305",
        "session_key": "agent:main:slack:group:T04ABCDEF1:C07QWERTY12:1794648600.412305",
        "session_id": LABELS["slack_thread"], "rule": "Slack workspace in the key (spec §12)"}]


def test_lineage_end_reasons_and_flags(imported) -> None:
    t, _ = imported
    sessions = {s.session_id: s for s in t.sessions()}
    assert sessions[LABELS["tg_grp_ravi_child"]].parent_session_id == LABELS["tg_grp_ravi_parent"]
    assert sessions[LABELS["tg_grp_ravi_parent"]].end_reason == "compression"
    assert sessions[LABELS["tg_dm_1"]].end_reason == "session_reset"
    assert sessions[LABELS["email_1"]].end_reason == "idle"
    assert sessions[LABELS["cli"]].end_reason == "cli_close"
    assert sessions[LABELS["discord_thread"]].resume_pending is True
    assert sessions[LABELS["discord_thread"]].resume_reason == "restart_timeout"
    assert sessions[LABELS["slack_dm"]].suspended is True
    live = [s for s in sessions.values() if not s.end_reason]
    assert {s.session_id for s in live if s.routed} == {e["session_id"] for e in hermes_routing().values()}


def test_the_restart_counter_is_carried_to_the_sessions_lease(imported) -> None:
    t, _ = imported
    events = [e for e in t.history(LABELS["discord_thread"]) if e.event == "LeaseRestartsCarried"]
    assert [e.data["count"] for e in events] == [1]


def test_history_names_the_import_as_actor_and_cause(imported) -> None:
    t, _ = imported
    for label in ("tg_dm_1", "cli", "slack_thread"):
        entries = t.history(LABELS[label])
        assert entries and all(e.actor == "import:hermes" for e in entries)
        assert {e.cause for e in entries} == {f"hermes:{HOME.resolve()}#{LABELS[label]}"}


def test_search_finds_imported_cjk_and_emoji_text(imported) -> None:
    t, _ = imported
    hits = t.search("生日快乐")
    assert {h.session_id for h in hits} == {LABELS["weixin_dm"]}
    assert any("🎂" in h.snippet for h in hits)
    assert LABELS["tg_dm_1"] in {h.session_id for h in t.search("东京")}
    assert LABELS["tg_dm_2"] in {h.session_id for h in t.search("December reading")}


def test_time_travel_across_the_import_point(imported) -> None:
    t, _ = imported
    end = t.history(LABELS["email_2"])[-1].position
    assert t.at("#0").routes() == []
    after = {r["session_key"]: r["session_id"] for r in t.at(f"#{end}").routes()}
    assert after["agent:main:email:dm:dana.whitfield@example.org"] == LABELS["email_2"]
    changed = t.diff("#0", f"#{end}")
    assert changed["keys"]["agent:main:email:dm:dana.whitfield@example.org"][0]["to_session"] == LABELS["email_2"]
    assert changed["sessions"][LABELS["email_2"]]["messages_added"] == 2  # 3 rows, one a session_meta marker


def test_a_new_message_from_each_imported_chat_lands_in_the_imported_session(tmp_path) -> None:
    t = open_engine(tmp_path / "t.db")
    with t:
        t.import_hermes(HOME)
        for key, entry in hermes_routing().items():
            result = t.get_or_create_session(SessionSource.from_dict(entry["origin"]))
            if entry["suspended"]:  # /stop: the next message starts a new session (docs/behaviour.md §3.5)
                assert result.created and result.previous_session_id == entry["session_id"], key
                assert result.reason == "suspended"
            else:
                assert not result.created and result.session_id == entry["session_id"], key
        # a WhatsApp message from the phone JID (not the LID) still finds it, through the aliases
        wa = t.get_or_create_session(SessionSource(platform="whatsapp", chat_type="dm",
                                                   chat_id="15551234567@s.whatsapp.net"))
        assert wa.session_id == LABELS["whatsapp_dm"]


def test_the_agent_sees_only_the_live_rows_of_a_compacted_or_rewound_session(tmp_path) -> None:
    with open_engine(tmp_path / "t.db") as t:
        t.import_hermes(HOME)
        for label, key in (("feishu_group", "agent:main:feishu:group:oc_5f2a9c0e7b1d4a3f8e6c2b1a0d9e8f7a:"
                                             "on_1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d"),
                           ("weixin_dm", "agent:main:weixin:dm:o9cq807dznGkJ6X0aKz1bQ@im.wechat")):
            seen: list[list[str]] = []
            origin = hermes_routing()[key]["origin"]
            t.handle_message(SessionSource.from_dict({**origin, "message_id": f"m-{label}"}), "继续",
                             lambda history, item: seen.append([m.content for m in history]) or "好",
                             lambda text: None)
            live = hermes_rows("SELECT content FROM messages WHERE session_id=? AND active=1 AND role != 'session_meta'"
        " ORDER BY id",
                               (LABELS[label],))
            assert seen == [[r["content"] or "" for r in live] + ["继续"]]


def test_a_turn_continues_an_imported_transcript(tmp_path) -> None:
    t = open_engine(tmp_path / "t.db")
    with t:
        t.import_hermes(HOME)
        origin = hermes_routing()["agent:main:telegram:dm:5512345678"]["origin"]
        seen: list[int] = []

        def agent(history, item) -> str:  # type: ignore[no-untyped-def]
            seen.append(len(history))
            return "好的"
        t.handle_message(SessionSource.from_dict({**origin, "message_id": "m-new"}), "还有别的书吗？", agent,
                         lambda text: None)
        transcript = t.transcript(LABELS["tg_dm_2"])
        assert [m["content"] for m in transcript[-2:]] == ["还有别的书吗？", "好的"]
        assert [m["seq"] for m in transcript] == list(range(1, 7))  # 5 rows, one a session_meta marker
        assert seen == [5]


# -- Slack legacy keys (docs/behaviour.md §12) ----------------------------------------------------------------


def _edit_routing(home: Path, key: str, change) -> None:  # type: ignore[no-untyped-def]
    path = home / "sessions" / "sessions.json"
    data = json.loads(path.read_text())
    change(data[key])
    path.write_text(json.dumps(data, indent=2))
    db = sqlite3.connect(home / "state.db")
    with db:
        db.execute("UPDATE gateway_routing SET entry_json=? WHERE session_key=?", (json.dumps(data[key]), key))
    db.close()


def test_slack_rule_1_a_workspace_route_takes_only_its_workspace(imported) -> None:
    t, _ = imported
    origin = hermes_routing()["agent:main:slack:group:C07QWERTY12:1794648600.412305"]["origin"]
    same = t.get_or_create_session(SessionSource.from_dict(origin))
    assert not same.created and same.session_id == LABELS["slack_thread"]
    other = t.get_or_create_session(SessionSource.from_dict({**origin, "scope_id": "T09OTHER99", "guild_id": None}))
    assert other.created and other.session_id != LABELS["slack_thread"]


def test_slack_rule_2_a_scopeless_dm_is_claimed_by_the_first_workspace(tmp_path) -> None:
    home = copy_home(tmp_path / "home")
    _edit_routing(home, "agent:main:slack:dm:D06ZXCVBN34", lambda e: e.update(suspended=False))
    with open_engine(tmp_path / "t.db") as t:
        report = t.import_hermes(home)
        # no workspace in its origin: it stays on the legacy key
        assert LABELS["slack_dm"] not in {r["session_id"] for r in report.routes_rekeyed}
        origin = hermes_routing()["agent:main:slack:dm:D06ZXCVBN34"]["origin"]
        first = t.get_or_create_session(SessionSource.from_dict({**origin, "scope_id": "T04ABCDEF1"}))
        assert (first.created, first.session_id, first.reason) == (False, LABELS["slack_dm"], "slack_scope_migration")
        assert first.session_key == "agent:main:slack:dm:T04ABCDEF1:D06ZXCVBN34"
        second = t.get_or_create_session(SessionSource.from_dict({**origin, "scope_id": "T05SECOND1"}))
        assert second.created and second.session_id != LABELS["slack_dm"]


def test_slack_rule_3_a_scopeless_channel_is_never_adopted(tmp_path) -> None:
    home = copy_home(tmp_path / "home")
    key = "agent:main:slack:group:C07QWERTY12:1794648600.412305"

    def drop_scope(entry: dict[str, Any]) -> None:
        entry["origin"].pop("scope_id")
        entry["origin"].pop("guild_id")
    _edit_routing(home, key, drop_scope)
    with open_engine(tmp_path / "t.db") as t:
        t.import_hermes(home)
        assert {r.session_key: r.session_id for r in t.routes()}[key] == LABELS["slack_thread"]
        origin = hermes_routing()[key]["origin"]
        scoped = t.get_or_create_session(SessionSource.from_dict(origin))  # names workspace T04ABCDEF1
        assert scoped.created and scoped.session_id != LABELS["slack_thread"]


# -- idempotence, dry run, CLI -------------------------------------------------------------------


def test_a_second_import_imports_nothing_and_says_so(tmp_path) -> None:
    db = str(tmp_path / "t.db")
    runner = CliRunner()
    first = runner.invoke(main, ["--db", db, "import-hermes", str(HOME), "--json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["sessions_imported"] == 14
    with Turnlog(db) as t:
        before = t.maintenance.catch_up(), len(t.history(LABELS["tg_dm_1"])), t._app.recorder.max_notification_id()
    second = runner.invoke(main, ["--db", db, "import-hermes", str(HOME)])
    assert second.exit_code == 0, second.output
    assert "nothing to import: the 14 sessions" in second.output
    with Turnlog(db) as t:
        assert t._app.recorder.max_notification_id() == before[2]


def test_dry_run_writes_nothing(tmp_path) -> None:
    db = str(tmp_path / "t.db")
    result = CliRunner().invoke(main, ["--db", db, "import-hermes", str(HOME), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "would import 14 sessions" in result.output
    assert not os.path.exists(db)  # a dry run against a database not made yet creates none
    with Turnlog(db) as t:
        CliRunner().invoke(main, ["--db", db, "import-hermes", str(HOME), "--dry-run"])
        assert t.sessions() == [] and (t._app.recorder.max_notification_id() or 0) == 0


def test_the_report_names_what_was_skipped_and_why(tmp_path) -> None:
    home = copy_home(tmp_path / "home")
    db = sqlite3.connect(home / "state.db")
    with db:
        db.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'narrator', 'x', 1)",
                   (LABELS["tg_dm_2"],))
        db.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('ghost', 'user', 'x', 1)")
    db.close()
    _edit_routing(home, "agent:main:telegram:dm:5512345678",
                  lambda e: e.update(session_id=LABELS["tg_dm_1"]))  # an ended session
    result = CliRunner().invoke(main, ["--db", str(tmp_path / "t.db"), "import-hermes", str(home), "--json"])
    assert result.exit_code == 0, result.output
    skipped = json.loads(result.output)["skipped"]
    assert {"what": "routing key agent:main:telegram:dm:5512345678",
            "reason": f"session {LABELS['tg_dm_1']} already ended (session_reset)"} in skipped
    assert any(s["reason"] == "unknown role 'narrator'" for s in skipped)
    assert {"what": "1 messages of session ghost", "reason": "no sessions row for them"} in skipped


@pytest.mark.parametrize("args, code, message", [
    (["/nonexistent/hermes"], 2, "not a directory"),
    (["{tmp}"], 2, "no state.db"),
    (["{junk}"], 1, "not a readable SQLite database"),
    (["{half}"], 1, "no messages table"),  # not 'OperationalError: no such table: messages'
])
def test_bad_homes_fail_with_one_line(tmp_path, args: list[str], code: int, message: str) -> None:
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "state.db").write_text("not sqlite")
    half = copy_home(tmp_path / "half")
    with sqlite3.connect(half / "state.db") as db:
        db.execute("DROP TABLE messages")
    db.close()
    argv = [a.format(tmp=tmp_path, junk=tmp_path / "junk", half=half) for a in args]
    result = CliRunner().invoke(main, ["--db", str(tmp_path / "t.db"), "import-hermes", *argv])
    assert result.exit_code == code
    assert message in result.output and "Traceback" not in result.output


def test_an_older_home_without_newer_columns_imports_with_their_defaults(tmp_path) -> None:
    home = copy_home(tmp_path / "home")
    db = sqlite3.connect(home / "state.db")
    with db:
        db.execute("DROP INDEX IF EXISTS idx_messages_session_active")
        db.execute("DROP INDEX IF EXISTS idx_messages_active_null")
        db.execute("DROP INDEX IF EXISTS idx_messages_platform_msg_id")
        for column in ("active", "compacted", "observed", "api_content", "reasoning_details", "platform_message_id"):
            db.execute(f"ALTER TABLE messages DROP COLUMN {column}")
        for column in ("archived", "rewind_count", "profile_name"):
            db.execute(f"ALTER TABLE sessions DROP COLUMN {column}")
    db.close()
    with open_engine(tmp_path / "t.db") as t:
        report = t.import_hermes(home)
        assert (report.sessions_imported, report.skipped) == (14, [])
        weixin = t.transcript(LABELS["weixin_dm"])
        assert len(weixin) == 6 and weixin[0]["platform_message_id"] is None  # 7 rows, one a marker
        t.export_hermes(tmp_path / "out")
    # without the columns every row reads as active, not compacted
    assert sqlite3.connect(tmp_path / "out" / "state.db").execute(
        "SELECT count(*) FROM messages WHERE active = 0 OR compacted = 1").fetchone() == (0,)


def test_a_profile_is_imported_from_its_folder(tmp_path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    copy_home(root / "profiles" / "work")
    runner = CliRunner()
    result = runner.invoke(main, ["--db", str(tmp_path / "t.db"), "import-hermes", str(root), "--profile", "work",
                                  "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["sessions_imported"] == 14
    missing = runner.invoke(main, ["--db", str(tmp_path / "t.db"), "import-hermes", str(root), "--profile", "nope"])
    assert missing.exit_code == 2 and "not a directory" in missing.output


def test_an_entry_of_an_uninstalled_plugin_platform_is_skipped_with_its_reason(tmp_path) -> None:
    home = copy_home(tmp_path / "home")
    _edit_routing(home, "agent:main:weixin:dm:o9cq807dznGkJ6X0aKz1bQ@im.wechat",
                  lambda e: e["origin"].update(platform="mastodon"))
    with open_engine(tmp_path / "t.db") as t:
        report = t.import_hermes(home)
        assert report.sessions_imported == 14 and report.routes_imported == 9
        [skip] = report.skipped
        assert skip["what"] == "routing key agent:main:weixin:dm:o9cq807dznGkJ6X0aKz1bQ@im.wechat"
        assert "unknown platform 'mastodon'" in skip["reason"]


def test_a_progress_bar_is_drawn_on_a_terminal_only(tmp_path) -> None:
    import os
    import pty
    import subprocess
    import sys

    def run(db: str, stderr_tty: bool) -> str:
        master, slave = pty.openpty()
        proc = subprocess.run([sys.executable, "-m", "turnlog", "--db", db, "import-hermes", str(HOME)],
                              stdout=subprocess.PIPE, stderr=slave if stderr_tty else subprocess.PIPE, timeout=120)
        os.close(slave)
        drawn = b""
        if stderr_tty:
            os.set_blocking(master, False)
            try:
                while chunk := os.read(master, 65536):
                    drawn += chunk
            except (BlockingIOError, OSError):
                pass
        else:
            drawn = proc.stderr
        os.close(master)
        assert proc.returncode == 0
        return drawn.decode(errors="replace")
    assert "importing messages" in run(str(tmp_path / "a.db"), stderr_tty=True)
    assert "importing messages" not in run(str(tmp_path / "b.db"), stderr_tty=False)


def test_structured_content_is_kept_byte_for_byte(tmp_path) -> None:
    home = copy_home(tmp_path / "home")
    parts = [{"type": "text", "text": "这张图里是什么？📷"}, {"type": "image_url", "image_url": {"url": "data:,x"}}]
    structured = "\x00json:" + json.dumps(parts)
    db = sqlite3.connect(home / "state.db")
    with db:
        db.execute("UPDATE messages SET content=? WHERE id=(SELECT min(id) FROM messages WHERE session_id=?)",
                   (structured, LABELS["tg_dm_2"]))
    db.close()
    with open_engine(tmp_path / "t.db") as t:
        t.import_hermes(home)
        assert t.transcript(LABELS["tg_dm_2"])[0]["content"] == structured
        t.export_hermes(tmp_path / "out")
    exported = sqlite3.connect(tmp_path / "out" / "state.db").execute(
        "SELECT content FROM messages WHERE session_id=? ORDER BY id LIMIT 1", (LABELS["tg_dm_2"],)).fetchone()
    assert exported == (structured,)
