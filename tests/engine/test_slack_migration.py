"""Slack keys gained the workspace (scope) after older gateways stored scope-less ones (docs/behaviour.md §12)."""

import pytest

from turnlog import SessionSource


@pytest.fixture
def t(make_turnlog):
    return make_turnlog()


def slack(chat_type, scope=None, **ids):
    return SessionSource(platform="slack", chat_type=chat_type, scope_id=scope, **ids)


def test_a_scope_less_dm_is_claimed_by_the_first_workspace_only(t):
    old = t.get_or_create_session(slack("dm", chat_id="D1"))
    assert old.session_key == "agent:main:slack:dm:D1"

    moved = t.get_or_create_session(slack("dm", "T1", chat_id="D1"))

    assert moved.session_key == "agent:main:slack:dm:T1:D1"
    assert (moved.session_id, moved.created, moved.reason) == (old.session_id, False, "slack_scope_migration")
    routes = {r.session_key: r.session_id for r in t.routes()}
    assert routes == {"agent:main:slack:dm:D1": None, "agent:main:slack:dm:T1:D1": old.session_id}
    other = t.get_or_create_session(slack("dm", "T2", chat_id="D1"))
    assert other.created and other.session_id != old.session_id  # the legacy entry moved once
    events = [h.event for h in t.history(old.session_id)]
    # each route registered already bound: the legacy one to the session, then the workspace's on taking it over
    assert events.count("RouteDetached") == 1 and events.count("RouteRegistered") == 2


def test_a_scope_less_channel_is_never_adopted_by_a_workspace(t):
    old = t.get_or_create_session(slack("channel", chat_id="C123", user_id="U9"))

    scoped = t.get_or_create_session(slack("channel", "T1", chat_id="C123", user_id="U9"))

    assert scoped.created and scoped.session_id != old.session_id and scoped.reason == "first_message"
    assert {r.session_key: r.session_id for r in t.routes()}["agent:main:slack:channel:C123:U9"] == old.session_id


def test_force_new_and_ended_legacy_sessions_are_not_adopted(t):
    old = t.get_or_create_session(slack("dm", chat_id="D7"))
    t.command(slack("dm", chat_id="D7"), "/new")  # ends it and detaches the legacy route

    fresh = t.get_or_create_session(slack("dm", "T1", chat_id="D7"))
    assert fresh.created and fresh.session_id != old.session_id

    t2 = t.get_or_create_session(slack("dm", chat_id="D8"))
    forced = t.get_or_create_session(slack("dm", "T1", chat_id="D8"), force_new=True)
    assert forced.created and forced.session_id != t2.session_id
