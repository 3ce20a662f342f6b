"""Issue 11 item 1: `/resume` from a chat takes back only that chat's (or that user's) own sessions;
an operator's `switch` to another key's session needs --force (API: force=True)."""

from __future__ import annotations

import json

import pytest

from turnlog import SessionSource, SessionOwnedElsewhere
from harness.cli import run

VICTIM = SessionSource(platform="weixin", chat_id="wx-victim", user_id="wx-victim", user_name="victim")
ATTACKER = SessionSource(platform="telegram", chat_id="666", user_id="666", user_name="mallory",
                         message_id="m-666")
ALICE_DM = SessionSource(platform="telegram", chat_id="42", user_id="42")
ALICE_IN_GROUP = SessionSource(platform="telegram", chat_type="group", chat_id="-100", user_id="42")


def reply(history, item):
    return f"re: {item.text}"


def talk(t, source, text):
    return t.handle_message(source, text, reply, lambda text: None)[0].session_id


def current(t, source):
    key = t.routing_key(source)
    return next((r.session_id for r in t.routes() if r.session_key == key), None)


def test_a_chat_cannot_resume_another_users_session(t):
    victim_session = talk(t, VICTIM, "my secret plans")
    talk(t, ATTACKER, "hi")
    attacker_session = current(t, ATTACKER)

    result = t.command(ATTACKER, f"/resume {victim_session}")

    assert result.changed is False and result.session_id is None
    assert result.reply == f"No session {victim_session}."
    assert current(t, ATTACKER) == attacker_session  # the attacker's key was not rebound
    assert current(t, VICTIM) == victim_session
    assert all(m["content"] != "my secret plans" for m in t.transcript(attacker_session))
    refused = [h for h in t.history(t.routing_key(ATTACKER)) if h.event == "ResumeRefused"]
    assert len(refused) == 1
    assert refused[0].actor == "telegram:user:666" and refused[0].cause == "command:/resume:m-666"
    assert refused[0].data["requested_session_id"] == victim_session and victim_session in refused[0].summary


def test_another_users_session_is_answered_as_an_unknown_id_is(t):
    victim_session = talk(t, VICTIM, "hello")
    unknown = "20990101_000000_feedf00d"
    probe = SessionSource(platform="telegram", chat_id="666", user_id="666", user_name="mallory")

    taken = t.command(probe, f"/resume {victim_session}")
    missing = t.command(probe, f"/resume {unknown}")

    # Nothing in the answer may tell a stranger that the id exists.
    assert (taken.reply.replace(victim_session, "ID"), taken.changed, taken.session_id) \
        == (missing.reply.replace(unknown, "ID"), missing.changed, missing.session_id)


def test_a_refused_resume_on_a_key_never_routed_creates_no_session(t):
    victim_session = talk(t, VICTIM, "hello")
    before = {s.session_id for s in t.sessions()}

    result = t.command(ATTACKER, f"/resume {victim_session}")

    assert result.changed is False and result.reply == f"No session {victim_session}."
    assert {s.session_id for s in t.sessions()} == before
    # The command's message id is remembered (inbound dedup); no session or binding is made.
    assert [h.event for h in t.history(t.routing_key(ATTACKER))] == ["InboundMessageFirstSeen", "RouteRegistered",
                                                                    "ResumeRefused"]


def test_a_chat_resumes_a_session_it_had_before(t):
    first = talk(t, ALICE_DM, "first conversation")
    t.command(ALICE_DM, "/new")
    talk(t, ALICE_DM, "second conversation")

    result = t.command(ALICE_DM, f"/resume {first}")

    assert result.changed is True and current(t, ALICE_DM) == first


def test_a_user_resumes_their_own_session_from_another_chat_of_the_same_platform(t):
    dm_session = talk(t, ALICE_DM, "started in the DM")

    result = t.command(ALICE_IN_GROUP, f"/resume {dm_session}")

    assert result.changed is True and current(t, ALICE_IN_GROUP) == dm_session


def test_the_same_user_id_on_another_platform_owns_nothing(t):
    dm_session = talk(t, ALICE_DM, "telegram user 42")
    impostor = SessionSource(platform="discord", chat_id="42", user_id="42")

    result = t.command(impostor, f"/resume {dm_session}")

    assert result.changed is False and current(t, impostor) != dm_session


def test_api_switch_to_another_keys_session_needs_force(t):
    victim_session = talk(t, VICTIM, "hello")
    talk(t, ATTACKER, "hi")

    with pytest.raises(SessionOwnedElsewhere, match="belongs to routing key"):
        t.switch_session(ATTACKER, victim_session)
    assert current(t, ATTACKER) != victim_session

    t.switch_session(ATTACKER, victim_session, force=True)
    assert current(t, ATTACKER) == victim_session


def test_cli_switch_warns_and_needs_force_for_another_keys_session(t, db):
    victim_session = talk(t, VICTIM, "hello")
    talk(t, ATTACKER, "hi")
    key = t.routing_key(ATTACKER)
    t.close()

    refused = run("--db", db, "switch", key, victim_session)
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    assert [line for line in refused.stderr.splitlines() if line] == [
        f"Error: session {victim_session} belongs to routing key {VICTIM_KEY!r}, not {key!r}: give --force to take it"]

    forced = run("--db", db, "switch", key, victim_session, "--force", "--json")
    assert forced.exit_code == 0, forced.output
    assert json.loads(forced.stdout)["session_id"] == victim_session
    assert "warning: session" in forced.stderr and "--force" in forced.stderr


VICTIM_KEY = "agent:main:weixin:dm:wx-victim"
