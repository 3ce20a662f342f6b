"""The `turnlog` command at its surface: what each command prints, and how it refuses bad input."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from harness.cli import ok, run

KEY = "agent:main:telegram:dm:42"
ALICE_ARGS = ["--platform", "telegram", "--chat-id", "42", "--user-id", "42"]


def as_json(result: Result) -> Any:
    return json.loads(result.stdout)


def assert_one_line_error(result: Result, exit_code: int, mentions: str) -> None:
    assert result.exit_code == exit_code, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, result.output
    assert mentions in errors[0]


def route(db: str, *source: str, message_id: str) -> dict[str, Any]:
    return as_json(ok("--db", db, "route", *source, "--message-id", message_id, "--json"))


@pytest.fixture
def lived(db) -> dict[str, str]:
    """Alice's key through every operation: created, touched, marked, cleared, suspended, replaced, switched."""
    first = route(db, *ALICE_ARGS, message_id="m1")["session_id"]
    route(db, *ALICE_ARGS, message_id="m2")
    assert ok("--db", db, "resume-pending", KEY).output.strip() == "changed"
    assert ok("--db", db, "resume-pending", KEY, "--clear").output.strip() == "changed"
    assert ok("--db", db, "suspend", KEY, "--reason", "abuse").output.strip() == "suspended"
    second = route(db, *ALICE_ARGS, message_id="m3")
    assert second["reason"] == "suspended"
    assert ok("--db", db, "switch", KEY, first).output.strip() == f"{KEY} -> {first}"
    return {"first": first, "second": second["session_id"]}


# --- history ---------------------------------------------------------------------------------


EXPECTED_HISTORY = [
    # (event, actor, cause, session, data that must be present)
    ("SessionCreated", "telegram:user:42", "message:m1", "first", {"reason": "first_message"}),
    # registered already bound to the key's first session (one event)
    ("RouteRegistered", "telegram:user:42", "message:m1", "first", {"session_key": KEY, "reason": "first_message"}),
    ("ActivityTouched", "telegram:user:42", "message:m2", "first", {}),
    ("ResumePendingMarked", "cli", "cli:resume-pending", "first", {"reason": "restart_timeout"}),
    ("ResumePendingCleared", "cli", "cli:resume-pending", "first", {}),
    ("SessionSuspended", "cli", "cli:suspend", "first", {"reason": "abuse"}),
    ("SessionEnded", "system:policy", "message:m3", "first", {"reason": "suspended"}),
    ("SessionCreated", "telegram:user:42", "message:m3", "second", {"reason": "suspended"}),
    ("RouteBound", "telegram:user:42", "message:m3", "second", {"reason": "suspended"}),
    ("SessionEnded", "cli", "cli:switch", "second", {"reason": "session_switch"}),
    ("SessionReopened", "cli", "cli:switch", "first", {"session_key": KEY}),
    ("RouteBound", "cli", "cli:switch", "first", {"reason": "session_switch"}),
]


def test_history_json_lists_every_operation_with_actor_and_cause(db, lived):
    entries = as_json(ok("--db", db, "history", KEY, "--json"))

    assert [(e["event"], e["actor"], e["cause"], e["session_id"]) for e in entries] == [
        (event, actor, cause, lived.get(session)) for event, actor, cause, session, _ in EXPECTED_HISTORY]
    for entry, (*_, data) in zip(entries, EXPECTED_HISTORY):
        assert data.items() <= entry["data"].items(), entry
    assert [e["position"] for e in entries] == sorted(e["position"] for e in entries)


def test_history_table_shows_every_operation_with_actor_and_cause(db, lived):
    lines = ok("--db", db, "history", KEY).output.splitlines()

    assert lines[0].split() == ["position", "at", "event", "actor", "cause", "session_id", "summary"]
    rows = lines[1:]
    assert len(rows) == len(EXPECTED_HISTORY)
    for row, (event, actor, cause, session, data) in zip(rows, EXPECTED_HISTORY):
        cells = row.split()
        assert cells[2:5] == [event, actor, cause], row
        assert cells[5] == (lived[session] if session else "-"), row
        for value in data.values():
            assert value in " ".join(cells[6:]), row  # the one-line summary names it


def test_history_of_a_session_id_lists_only_that_session(db, lived):
    entries = as_json(ok("--db", db, "history", lived["second"], "--json"))

    assert {e["session_id"] for e in entries} == {lived["second"]}
    assert [e["event"] for e in entries] == ["SessionCreated", "RouteBound", "SessionEnded"]


def test_history_of_an_unknown_key_fails_in_one_line(db, lived):
    assert_one_line_error(run("--db", db, "history", "agent:main:telegram:dm:nobody"), 1, "nobody")


# --- key (no database) --------------------------------------------------------------------------


def test_key_prints_a_slack_workspace_scoped_key_without_a_database(tmp_path):
    missing = tmp_path / "never-created.db"
    slack = ["--platform", "slack", "--chat-type", "channel", "--chat-id", "C123", "--scope-id", "T1",
             "--user-id", "U9"]

    per_user = ok("--db", str(missing), "key", *slack)
    shared = ok("--db", str(missing), "key", *slack, "--no-group-per-user")

    assert per_user.output.splitlines() == ["agent:main:slack:channel:T1:C123:U9", "shared: no"]
    assert shared.output.splitlines() == ["agent:main:slack:channel:T1:C123", "shared: yes"]
    assert list(tmp_path.iterdir()) == []


def test_key_canonicalises_a_whatsapp_phone_number_dm(tmp_path):
    not_a_db = tmp_path / "notes.txt"
    not_a_db.write_text("not a database\n")

    result = ok("--db", str(not_a_db), "key", "--platform", "whatsapp", "--chat-id", "+1 555 123 4567", "--json")

    data = as_json(result)
    assert (data["session_key"], data["shared"]) == ("agent:main:whatsapp:dm:15551234567", False)
    assert ok("key", "--platform", "whatsapp", "--chat-id", "15551234567@s.whatsapp.net", "--json"
              ).stdout == result.stdout


# --- route, sessions, export-routing -----------------------------------------------------------------


def test_route_json_reports_key_session_created_and_reason(db):
    first = route(db, *ALICE_ARGS, message_id="m1")
    again = route(db, *ALICE_ARGS, message_id="m2")
    fresh = as_json(ok("--db", db, "route", *ALICE_ARGS, "--force-new", "--json"))

    assert {"session_key", "session_id", "created", "reason"} <= first.keys()
    assert (first["session_key"], first["created"], first["reason"]) == (KEY, True, "first_message")
    assert (again["session_id"], again["created"], again["reason"]) == (first["session_id"], False, None)
    assert (fresh["created"], fresh["reason"], fresh["previous_session_id"]) == (True, "force_new",
                                                                                 first["session_id"])


def test_route_prints_a_readable_summary(db):
    lines = ok("--db", db, "route", *ALICE_ARGS).output.splitlines()

    assert lines[0] == f"session_key: {KEY}"
    assert lines[1].startswith("session_id:  ")
    assert lines[2] == "created:     yes (first_message)"


def test_sessions_json_lists_each_session_with_its_flags(db, lived):
    rows = as_json(ok("--db", db, "sessions", "--json"))

    by_id = {r["session_id"]: r for r in rows}
    assert by_id.keys() == {lived["first"], lived["second"]}
    first, second = by_id[lived["first"]], by_id[lived["second"]]
    assert (first["session_key"], first["end_reason"], first["suspended"], first["routed"]) == (KEY, None, False, True)
    assert (second["created_reason"], second["end_reason"], second["routed"]) == ("suspended", "session_switch",
                                                                                  False)
    assert second["previous_session_id"] == lived["first"]


def test_sessions_table_shows_each_state(db, lived):
    lines = ok("--db", db, "sessions").output.splitlines()

    assert lines[0].split() == ["session_id", "session_key", "state", "created_reason", "updated_at", "title"]
    states = {line.split()[0]: line.split()[2] for line in lines[1:]}
    assert states == {lived["first"]: "active", lived["second"]: "ended:session_switch"}


HERMES_ENTRY_FIELDS = {
    "session_key", "session_id", "created_at", "updated_at", "origin", "display_name", "platform", "chat_type",
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens",
    "last_prompt_tokens", "estimated_cost_usd", "cost_status", "was_auto_reset", "auto_reset_reason",
    "reset_had_activity", "is_fresh_reset", "expiry_finalized", "suspended", "resume_pending", "resume_reason",
    "last_resume_marked_at", "model_override",
}


def test_export_routing_is_shaped_like_sessions_json(db):
    first = route(db, *ALICE_ARGS, message_id="m1")
    group = route(db, "--platform", "telegram", "--chat-type", "group", "--chat-id", "-100123", "--user-id", "77",
                  message_id="m2")
    ok("--db", db, "resume-pending", group["session_key"])

    data = as_json(ok("--db", db, "export-routing"))

    assert next(iter(data)) == "_README"
    assert set(data) == {"_README", KEY, group["session_key"]}
    alice = data[KEY]
    assert HERMES_ENTRY_FIELDS <= alice.keys()
    assert (alice["session_key"], alice["session_id"], alice["platform"], alice["chat_type"]) == (
        KEY, first["session_id"], "telegram", "dm")
    assert alice["origin"]["chat_id"] == "42"
    assert (alice["suspended"], alice["resume_pending"]) == (False, False)
    marked = data[group["session_key"]]
    assert (marked["resume_pending"], marked["resume_reason"]) == (True, "restart_timeout")
    assert marked["last_resume_marked_at"] is not None


def test_export_routing_to_a_file_writes_the_same_json(db, tmp_path):
    route(db, *ALICE_ARGS, message_id="m1")
    out = tmp_path / "sessions.json"

    ok("--db", db, "export-routing", "-o", str(out))

    assert json.loads(out.read_text()) == as_json(ok("--db", db, "export-routing"))


# --- switch ---------------------------------------------------------------------------------------


def test_switch_to_an_unknown_session_fails_in_one_line(db):
    route(db, *ALICE_ARGS, message_id="m1")

    assert_one_line_error(run("--db", db, "switch", KEY, "20990101_000000_deadbeef"), 1, "20990101_000000_deadbeef")


def test_switch_on_an_unknown_key_fails_in_one_line(db):
    target = route(db, *ALICE_ARGS, message_id="m1")["session_id"]

    assert_one_line_error(run("--db", db, "switch", "agent:main:telegram:dm:nobody", target), 1, "nobody")


# --- bad input: one line, no traceback -----------------------------------------------------------------


@pytest.mark.parametrize("command", [["key"], ["route"]])
def test_unknown_platform_is_a_usage_error(db, command):
    result = run("--db", db, *command, "--platform", "myspace", "--chat-id", "1")

    assert_one_line_error(result, 2, "unknown platform 'myspace'")
    assert not Path(db).exists()


def write_foreign_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE contacts (name TEXT)")
    conn.execute("INSERT INTO contacts VALUES ('alice')")
    conn.commit()
    conn.close()


def write_text(path: Path) -> None:
    path.write_text("shopping list: eggs, milk\n")


@pytest.mark.parametrize("make_file", [write_text, write_foreign_sqlite], ids=["text-file", "foreign-sqlite"])
@pytest.mark.parametrize("command", [["sessions"], ["route", *ALICE_ARGS], ["export-routing"]],
                         ids=["sessions", "route", "export-routing"])
def test_db_that_is_not_a_turnlog_database_is_refused_untouched(tmp_path, make_file, command):
    path = tmp_path / "other.db"
    make_file(path)
    before = path.read_bytes()

    result = run("--db", str(path), *command)

    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.output.count("\n") == 1 and result.output.startswith("Error: "), result.output
    assert "not a turnlog" in result.output
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


# --- demo ---------------------------------------------------------------------------------------------


def test_demo_runs_and_prints_the_routing_map(tmp_path):
    result = ok("--db", str(tmp_path / "demo.db"), "demo")

    assert "Routing map" in result.output
    assert "agent:main:telegram:dm:42" in result.output
    assert "agent:main:whatsapp:dm:15551234567" in result.output
    assert "new session (idle)" in result.output
    assert "new session (suspended)" in result.output
    assert "session_switch" in result.output


def test_demo_refuses_an_existing_database(db):
    route(db, *ALICE_ARGS, message_id="m1")

    assert_one_line_error(run("--db", db, "demo"), 2, "fresh database")
