"""/sessions: the chat's own sessions (those its key pointed at, and those its user started on the
platform), newest first, with title, age by the injected clock and message count; /resume takes a
title, looked up only among them."""

from __future__ import annotations

from turnlog import SessionSource
from chat import alice, echo

MALLORY = SessionSource(platform="telegram", chat_type="dm", chat_id="666", user_id="666")
ALICE_IN_GROUP = SessionSource(platform="telegram", chat_type="group", chat_id="-100", user_id="42")


def talk(t, source, text="hello"):
    return t.handle_message(source, text, echo, lambda text: None)[0].session_id


def test_sessions_lists_the_chats_sessions_newest_first(t, clock):
    first = talk(t, alice(), "one")
    t.command(alice(), "/title first try")
    clock.advance(hours=3)
    t.command(alice(), "/new")
    second = talk(t, alice(), "two")
    talk(t, alice(), "three")
    clock.advance(minutes=5)

    result = t.command(alice(), "/sessions")

    assert result.reply == "\n".join([
        "Sessions (newest first):",
        f"1. (untitled) · {second} · 5m ago · 4 messages (current)",
        f'2. "first try" · {first} · 3h ago · 2 messages',
        "Resume one with /resume <number, title or id>."])
    assert result.session_id == second and not result.changed


def test_sessions_shows_what_the_user_started_elsewhere_on_the_platform(t, clock):
    in_group = talk(t, ALICE_IN_GROUP, "group talk")
    clock.advance(days=2)
    in_dm = talk(t, alice(), "dm talk")

    reply = t.command(alice(), "/sessions").reply

    assert f"1. (untitled) · {in_dm} · just now · 2 messages (current)" in reply
    assert f"2. (untitled) · {in_group} · 2d ago · 2 messages" in reply


def test_sessions_never_lists_another_users_sessions(t):
    talk(t, MALLORY, "private")
    t.command(MALLORY, "/title mallory's secret")

    assert t.command(alice(), "/sessions").reply == "No sessions yet."
    talk(t, alice())
    assert "secret" not in t.command(alice(), "/sessions").reply


def test_resume_by_title_refuses_another_users_session_as_an_unknown_one(t):
    victims = talk(t, MALLORY, "private")
    t.command(MALLORY, "/title target")
    mine = talk(t, alice())

    result = t.command(alice(), "/resume target")

    assert result.reply == "No session target." and not result.changed and result.session_id is None
    assert t.session(alice()).session_id == mine and t.session(MALLORY).session_id == victims


def test_resume_by_title_reaches_the_newest_of_a_lineage_when_the_exact_title_is_gone(t):
    talk(t, alice())
    t.command(alice(), "/title trip")
    t.command(alice(), "/branch")
    newest = t.command(alice(), "/branch").session_id
    t.command(alice(), "/new")
    t.set_title(t.sessions(title="trip")[0].session_id, "renamed")  # "trip" itself no longer exists

    result = t.command(alice(), "/resume trip")

    assert result.session_id == newest and t.title(newest) == "trip #3"


def test_resume_by_id_still_works(t):
    first = talk(t, alice())
    t.command(alice(), "/new")
    talk(t, alice())

    assert t.command(alice(), f"/resume {first}").session_id == first


def test_sessions_lists_at_most_ten(t):
    for i in range(12):
        talk(t, alice(), f"m{i}")
        t.command(alice(), "/new")
    talk(t, alice())

    lines = t.command(alice(), "/sessions").reply.splitlines()

    assert len([line for line in lines if line.split(".", 1)[0].isdigit()]) == 10
    assert "… and 3 older" in lines


def test_resume_by_number_picks_from_the_sessions_list(t):
    first = talk(t, alice(), "one")
    t.command(alice(), "/new")
    talk(t, alice(), "two")

    listed = t.command(alice(), "/resume")
    picked = t.command(alice(), "/resume 2")

    assert listed.reply.startswith("Usage: /resume <session id, title or number>\n\nSessions (newest first):\n1. ")
    assert f"2. (untitled) · {first}" in listed.reply and not listed.changed
    assert picked.session_id == first and t.session(alice()).session_id == first
    assert t.command(alice(), "/resume 3").reply == "No session 3."
