"""`turnlog rekey`: the plan, a dry run that writes nothing, time travel before it, bad values."""

from __future__ import annotations

import json

import pytest

from turnlog import EngineConfig, ManualClock, SequentialIds, SessionSource, Turnlog
from harness.cli import ok, run

GROUP = "agent:main:telegram:group:-7"


def member(user: str, message_id: str) -> SessionSource:
    return SessionSource(platform="telegram", chat_type="group", chat_id="-7", user_id=user, message_id=message_id)


def thread_member(user: str, message_id: str) -> SessionSource:
    return SessionSource(platform="slack", chat_type="thread", chat_id="C1", thread_id="171.5", user_id=user,
                         scope_id="T1", message_id=message_id)


def chat(db: str, config: EngineConfig, *sources: SessionSource) -> list[str]:
    clock = ManualClock()
    with Turnlog(db, clock=clock, session_ids=SequentialIds(), config=config) as t:
        ids = []
        for source in sources:
            clock.advance(5)
            ids.append(t.handle_message(source, "hi", lambda h, i: "hello", lambda s: None)[0].session_id)
        return ids


@pytest.fixture
def per_user_group(tmp_path):
    db = str(tmp_path / "t.db")
    return db, chat(db, EngineConfig(), member("A", "m1"), member("B", "m2"))


def head(db: str) -> int:
    with Turnlog(db, read_only=True) as t:
        return t.maintenance.log_head()


def test_per_user_to_shared_moves_the_chat_key_to_the_most_recent_session(per_user_group):
    db, (alice, bob) = per_user_group
    report = json.loads(ok("--db", db, "rekey", "--group-sessions-per-user", "false", "--json").stdout)
    assert report["changed"] and report["old"]["group_sessions_per_user"] is True
    assert [(m["old_key"], m["new_key"], m["session_id"], m["reason"]) for m in report["moves"]] == [
        (GROUP + ":B", GROUP, bob, "rekey_per_user_to_shared")]
    assert [k["session_id"] for k in report["kept"]] == [alice]
    # Every old session stays reachable: listed, shown, not ended.
    sessions = {s["session_id"]: s for s in json.loads(ok("--db", db, "sessions", "--json").stdout)}
    assert {alice, bob} <= set(sessions) and sessions[alice]["ended_at"] is None
    assert json.loads(ok("--db", db, "show", alice, "--json").stdout)["session_id"] == alice
    assert json.loads(ok("--db", db, "show", GROUP, "--json").stdout)["session_id"] == bob
    # A new message after the rekey routes by the new rule (`route` opens with no key settings of its own).
    routed = json.loads(ok("--db", db, "route", "--platform", "telegram", "--chat-type", "group", "--chat-id", "-7",
                           "--user-id", "C", "--json").stdout)
    assert (routed["session_key"], routed["session_id"]) == (GROUP, bob)


def test_the_table_names_each_move(per_user_group):
    db, (alice, bob) = per_user_group
    output = ok("--db", db, "rekey", "--group-sessions-per-user", "no").output
    assert "group_sessions_per_user=true, thread_sessions_per_user=false -> group_sessions_per_user=false" in output
    assert f"{GROUP}:B" in output and bob in output and "rekey_per_user_to_shared" in output
    assert "kept where they are, listed and resumable: 1" in output and alice in output


def test_a_dry_run_writes_nothing_and_prints_the_same_plan(per_user_group):
    db, _ = per_user_group
    before = head(db)
    dry = json.loads(ok("--db", db, "rekey", "--group-sessions-per-user", "false", "--dry-run", "--json").stdout)
    assert head(db) == before and dry["dry_run"] and dry["position"] == 0
    assert json.loads(ok("--db", db, "at", f"#{before}", "settings", "--json").stdout)["settings"] == []
    real = json.loads(ok("--db", db, "rekey", "--group-sessions-per-user", "false", "--json").stdout)
    assert (dry["moves"], dry["kept"]) == (real["moves"], real["kept"])


def test_at_before_the_rekey_shows_the_old_keys_and_after_it_the_new(per_user_group):
    db, (alice, bob) = per_user_group
    before = head(db)
    report = json.loads(ok("--db", db, "rekey", "--group-sessions-per-user", "false", "--json").stdout)
    then = json.loads(ok("--db", db, "at", f"#{before}", "--json").stdout)["routes"]
    assert {r["session_key"] for r in then} == {GROUP + ":A", GROUP + ":B"}
    now = json.loads(ok("--db", db, "at", f"#{report['position']}", "--json").stdout)["routes"]
    assert {(r["session_key"], r["session_id"]) for r in now} == {(GROUP + ":A", alice), (GROUP + ":B", bob),
                                                                (GROUP, bob)}
    [settings] = json.loads(ok("--db", db, "at", f"#{report['position']}", "settings", "--json").stdout)["settings"]
    assert (settings["old"]["group_sessions_per_user"], settings["new"]["group_sessions_per_user"]) == (True, False)
    assert settings["actor"] == "cli"


def test_shared_to_per_user_on_a_thread(tmp_path):
    db = str(tmp_path / "t.db")
    [shared, again] = chat(db, EngineConfig(), thread_member("U1", "m1"), thread_member("U2", "m2"))
    assert shared == again
    report = json.loads(ok("--db", db, "rekey", "--thread-sessions-per-user", "true", "--json").stdout)
    thread = "agent:main:slack:thread:T1:C1:171.5"
    assert {(m["new_key"], m["session_id"]) for m in report["moves"]} == {(f"{thread}:U1", shared),
                                                                         (f"{thread}:U2", shared)}
    shown = json.loads(ok("--db", db, "show", f"{thread}:U2", "--json").stdout)
    assert shown["session_id"] == shared


@pytest.mark.parametrize("args", [
    ["rekey", "--group-sessions-per-user", "maybe"],
    ["rekey", "--thread-sessions-per-user", ""],
    ["rekey", "--group-sessions-per-user"],
    ["rekey"],
])
def test_bad_option_values_are_a_one_line_usage_error(per_user_group, args):
    db, _ = per_user_group
    before = head(db)
    result = run("--db", db, *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.startswith("Error")]) == 1
    assert head(db) == before
