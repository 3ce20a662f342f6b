"""Read models are disposable: drop them and rebuild them from the log, and every row comes back."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from turnlog.api import Turnlog
from turnlog.cli import main
from turnlog.clock import ManualClock, SequentialIds
from turnlog.config import EngineConfig
from turnlog.domain.policy import ResetPolicies, ResetPolicy
from turnlog.domain.source import SessionSource

from chat import ALICE

GROUP_ALICE = SessionSource(platform="telegram", chat_type="group", chat_id="-100123", user_id="42")
GROUP_BOB = SessionSource(platform="telegram", chat_type="group", chat_id="-100123", user_id="77")
DISCORD_THREAD = SessionSource(platform="discord", chat_type="thread", chat_id="555", thread_id="888",
                               user_id="42", scope_id="G1")
SLACK_T1 = SessionSource(platform="slack", chat_type="channel", chat_id="C123", user_id="U9", scope_id="T1")
WHATSAPP = SessionSource(platform="whatsapp", chat_type="dm", chat_id="+1 555 123 4567")


def open_engine(db: Path, clock: ManualClock | None = None) -> Turnlog:
    config = EngineConfig(reset=ResetPolicies(default=ResetPolicy(mode="idle", idle_minutes=60)),
                          freshness_window_s=3600)
    return Turnlog(db, config=config, clock=clock or ManualClock("2026-03-01T10:00:00+00:00"),
                   session_ids=SequentialIds())


def play_scenario(db: Path) -> None:
    """Several platforms, an idle reset, a suspension, resume markers, a forced reset and a switch."""
    clock = ManualClock("2026-03-01T10:00:00+00:00")
    with open_engine(db, clock) as t:
        first = t.get_or_create_session(ALICE).session_id
        for source in (GROUP_ALICE, GROUP_BOB, DISCORD_THREAD, SLACK_T1, WHATSAPP):
            t.get_or_create_session(source)
        clock.advance(minutes=30)
        t.get_or_create_session(DISCORD_THREAD)
        t.get_or_create_session(GROUP_BOB, touch_activity=False)
        clock.advance(minutes=61)
        assert t.get_or_create_session(ALICE).reason == "idle"
        t.mark_resume_pending(WHATSAPP, "restart_timeout")
        t.clear_resume_pending(WHATSAPP)
        t.mark_resume_pending(SLACK_T1, "restart_timeout")
        t.suspend(ALICE, "operator", actor="ops", cause="ticket:7")
        clock.advance(minutes=1)
        assert t.get_or_create_session(ALICE).reason == "suspended"
        t.get_or_create_session(GROUP_ALICE, force_new=True)
        t.switch_session(ALICE, first, actor="telegram:user:42", cause="command:/resume")


def snapshot(t: Turnlog) -> dict[str, Any]:
    keys = sorted({r.session_key for r in t.routes()})
    return {
        "routes": t.routes(),
        "sessions": t.sessions(),
        "history": {key: t.history(key) for key in keys},
        "export": t.export_routing(),
    }


def drop_read_models(db: Path, tables: tuple[str, ...], reset_positions: bool = True) -> None:
    conn = sqlite3.connect(db)
    try:
        for table in tables:
            conn.execute(f"DROP TABLE {table}")
        if reset_positions:
            conn.execute("UPDATE projection_positions SET position = 0")
        conn.commit()
    finally:
        conn.close()


def table_names(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        conn.close()


@pytest.fixture
def played(tmp_path) -> tuple[Path, dict[str, Any]]:
    db = tmp_path / "turnlog.db"
    play_scenario(db)
    with open_engine(db) as t:
        before = snapshot(t)
    return db, before


def test_scenario_fills_every_read_model(played):
    _, before = played
    assert len(before["routes"]) == 6
    assert len(before["sessions"]) == 9
    assert {s.created_reason for s in before["sessions"]} == {"first_message", "idle", "suspended",
                                                                  "force_new"}
    # The idle-ended first session was reopened by the switch.
    assert {s.end_reason for s in before["sessions"]} == {None, "suspended", "session_reset", "session_switch"}
    assert any(s.resume_pending for s in before["sessions"])
    assert all(before["history"].values())


def test_dropped_routing_tables_come_back_identical_after_rebuild(played):
    db, before = played
    drop_read_models(db, ("routes", "sessions", "timeline_streams", "timeline_mentions", "timeline_clock"))
    assert not {"routes", "sessions", "timeline_streams"} & table_names(db)

    with open_engine(db) as t:
        applied = t.maintenance.rebuild()["events"]
        after = snapshot(t)

    assert applied > 0
    assert after == before


def test_rebuild_restores_a_read_model_that_lost_its_rows_but_kept_its_position(played):
    db, before = played
    drop_read_models(db, ("routes",), reset_positions=False)

    with open_engine(db) as t:
        assert t.routes() == []  # the projection believes it is up to date
        t.maintenance.rebuild(["routes"])
        after = snapshot(t)

    assert after == before


def test_rebuild_of_intact_read_models_changes_nothing(played):
    db, before = played
    with open_engine(db) as t:
        t.maintenance.rebuild()
        assert snapshot(t) == before


def test_cli_rebuild_routes_restores_the_routing_map(played):
    db, before = played
    drop_read_models(db, ("routes",), reset_positions=False)

    result = CliRunner().invoke(main, ["--db", str(db), "rebuild", "routes", "--json"])

    assert result.exit_code == 0, result.output
    assert '"events"' in result.output
    with open_engine(db) as t:
        assert snapshot(t) == before


def test_cli_rebuild_all_after_dropping_every_routing_table(played):
    db, before = played
    drop_read_models(db, ("routes", "sessions", "timeline_streams", "timeline_mentions", "timeline_clock"))

    result = CliRunner().invoke(main, ["--db", str(db), "rebuild", "--all"])

    assert result.exit_code == 0, result.output
    assert result.output.startswith("rebuilt from ")
    with open_engine(db) as t:
        assert snapshot(t) == before


def test_cli_rebuild_of_an_unknown_projection_is_a_usage_error(played):
    db, _ = played

    result = CliRunner().invoke(main, ["--db", str(db), "rebuild", "nonsense"])

    assert result.exit_code == 2
    assert "unknown projection 'nonsense'" in result.output
    assert "Traceback" not in result.output
