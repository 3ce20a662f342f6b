"""Hermes 0.19.0's bundled plugin platforms: known by default, keyed by Hermes' rules (docs/behaviour.md §2,
HERMES_FORMATS §6 id shapes), names normalised like Hermes' Platform._missing_ (stripped, lower)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog, build_session_key, resolve_routing_key
from turnlog.cli import main

PLUGINS = ["google_chat", "irc", "line", "ntfy", "photon", "raft", "simplex", "teams"]


@pytest.mark.parametrize("name", PLUGINS)
def test_each_bundled_plugin_platform_is_known_without_registration(name: str) -> None:
    assert SessionSource(platform=name, chat_id="x").platform == name
    assert SessionSource(platform=f"  {name.upper()} ", chat_id="x").platform == name


def key(**fields: object) -> tuple[str, bool]:
    rk = resolve_routing_key(SessionSource(**fields))  # type: ignore[arg-type]
    return rk.key, rk.shared


def test_google_chat_threads_and_users_slash_ids() -> None:
    space, thread = "spaces/AAAA1234", "spaces/AAAA1234/threads/BBBB5678"
    # users/<id> (user_id_alt) wins over the e-mail in per-user keys
    assert key(platform="google_chat", chat_type="group", chat_id=space, user_id="ana@example.com",
               user_id_alt="users/1029384756") == (f"agent:main:google_chat:group:{space}:users/1029384756", False)
    # a thread is shared by everyone in it
    assert key(platform="google_chat", chat_type="group", chat_id=space, thread_id=thread,
               user_id="ana@example.com", user_id_alt="users/1029384756") == (
        f"agent:main:google_chat:group:{space}:{thread}", True)
    # a DM thread (the user replied inside an existing thread) keeps the thread
    assert key(platform="google_chat", chat_type="dm", chat_id="spaces/DM1", thread_id="spaces/DM1/threads/T1",
               user_id="ana@example.com", user_id_alt="users/1") == (
        "agent:main:google_chat:dm:spaces/DM1:spaces/DM1/threads/T1", False)
    # a DM without chat id falls back to users/<id>, not the e-mail
    assert key(platform="google_chat", chat_type="dm", chat_id="", user_id="ana@example.com",
               user_id_alt="users/1") == ("agent:main:google_chat:dm:users/1", False)


def test_irc_channels_and_nicks_and_the_platform_name_is_normalised() -> None:
    assert key(platform="IRC", chat_type="group", chat_id="#hermes-dev", user_id="alice") == (
        "agent:main:irc:group:#hermes-dev:alice", False)
    assert key(platform="irc", chat_type="group", chat_id="&local", user_id="bob") == (
        "agent:main:irc:group:&local:bob", False)
    assert key(platform=" Irc ", chat_type="dm", chat_id="alice", user_id="alice") == ("agent:main:irc:dm:alice", False)


def test_teams_ids_with_colons_never_collide_and_the_tenant_is_not_in_the_key() -> None:
    conv = "19:3f2a9b8c7d6e5f4a@thread.v2"
    user = "29:1AbCdEfGhIjKlMnOp"
    rk = resolve_routing_key(SessionSource(platform="teams", chat_type="channel", chat_id=conv, user_id=user,
                                           scope_id="tenant-0001"))
    assert rk.key == f"agent:main:teams:channel:{conv}:{user}"
    assert "tenant-0001" not in rk.key
    # Same key string from other parts (colon moved between chat and user): different route.
    a = resolve_routing_key(SessionSource(platform="teams", chat_type="group", chat_id="19:a", user_id="b"))
    b = resolve_routing_key(SessionSource(platform="teams", chat_type="group", chat_id="19", user_id="a:b"))
    assert a.key == b.key and a.route_id != b.route_id
    assert key(platform="teams", chat_type="dm", chat_id="a:1xYz", user_id=user) == ("agent:main:teams:dm:a:1xYz",
                                                                                     False)


def test_simplex_groups_are_group_colon_id() -> None:
    assert key(platform="simplex", chat_type="group", chat_id="group:42", user_id="7") == (
        "agent:main:simplex:group:group:42:7", False)
    assert key(platform="simplex", chat_type="dm", chat_id="7", user_id="7") == ("agent:main:simplex:dm:7", False)
    grp = resolve_routing_key(SessionSource(platform="simplex", chat_type="group", chat_id="group:42", user_id="7"))
    other = resolve_routing_key(SessionSource(platform="simplex", chat_type="group", chat_id="group", user_id="42:7"))
    assert grp.route_id != other.route_id


def test_line_rooms_keep_their_chat_type() -> None:
    assert key(platform="line", chat_type="room", chat_id="R0123456789abcdef", user_id="U1111") == (
        "agent:main:line:room:R0123456789abcdef:U1111", False)
    assert key(platform="line", chat_type="group", chat_id="C0123", user_id="U1111") == (
        "agent:main:line:group:C0123:U1111", False)
    assert key(platform="line", chat_type="dm", chat_id="U1111", user_id="U1111") == ("agent:main:line:dm:U1111", False)


def test_ntfy_photon_raft() -> None:
    assert key(platform="ntfy", chat_type="dm", chat_id="alerts-42", user_id="alerts-42") == (
        "agent:main:ntfy:dm:alerts-42", False)
    assert key(platform="photon", chat_type="dm", chat_id="iMessage;-;+15550001111", user_id="+15550001111") == (
        "agent:main:photon:dm:iMessage;-;+15550001111", False)
    assert key(platform="raft", chat_type="dm", chat_id="rs_7f3a", user_id="raft-bridge") == (
        "agent:main:raft:dm:rs_7f3a", False)


def test_plugin_platform_messages_route_to_one_session_per_chat(tmp_path) -> None:
    with Turnlog(str(tmp_path / "t.db"), clock=ManualClock(), session_ids=SequentialIds()) as t:
        first = t.get_or_create_session(SessionSource(platform="IRC", chat_type="group", chat_id="#dev",
                                                      user_id="alice"))
        again = t.get_or_create_session(SessionSource(platform="irc", chat_type="group", chat_id="#dev",
                                                      user_id="alice"))
        assert first.created and not again.created and again.session_id == first.session_id
        assert first.session_key == build_session_key(SessionSource(platform="irc", chat_type="group",
                                                                    chat_id="#dev", user_id="alice"))


def test_cli_key_accepts_a_plugin_platform() -> None:
    result = CliRunner().invoke(main, ["key", "--platform", "Google_Chat", "--chat-type", "group",
                                       "--chat-id", "spaces/A", "--thread-id", "spaces/A/threads/B",
                                       "--user-id", "a@example.com", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["session_key"] == "agent:main:google_chat:group:spaces/A:spaces/A/threads/B"
