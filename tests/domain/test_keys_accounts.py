"""Several bot accounts on one platform: the account a message arrived on is part of its key
(docs/behaviour.md §2.8), and a source without one keeps the key it always had."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnlog.domain.keys import build_session_key, legacy_account_key, legacy_slack_key, resolve_routing_key
from turnlog.domain.source import ChatType, Platform, SessionSource


def src(platform: str, chat_type: str, chat_id: str, **extra: str) -> SessionSource:
    return SessionSource(platform=platform, chat_type=chat_type, chat_id=chat_id, **extra)


def test_one_wechat_user_talking_to_two_accounts_has_two_keys() -> None:
    first = build_session_key(src("weixin", "dm", "u1", user_id="u1", account_id="bot_a"))
    second = build_session_key(src("weixin", "dm", "u1", user_id="u1", account_id="bot_b"))
    assert (first, second) == ("agent:main:weixin:dm:bot_a:u1", "agent:main:weixin:dm:bot_b:u1")


def test_one_telegram_user_talking_to_two_bots_has_two_keys() -> None:
    first = resolve_routing_key(src("telegram", "dm", "42", user_id="42", account_id="7001"))
    second = resolve_routing_key(src("telegram", "dm", "42", user_id="42", account_id="7002"))
    assert first.key == "agent:main:telegram:dm:7001:42"
    assert first.route_id != second.route_id


@pytest.mark.parametrize(
    ("source", "key"),
    [
        (src("telegram", "group", "-100123", user_id="42", account_id="7001"), "agent:main:telegram:group:7001:-100123:42"),
        (src("telegram", "group", "-100123", user_id="42", thread_id="5", account_id="7001"),
         "agent:main:telegram:group:7001:-100123:5"),
        (src("feishu", "dm", "", user_id="ou_1", account_id="cli_app2"), "agent:main:feishu:dm:cli_app2:ou_1"),
        (src("slack", "channel", "C123", user_id="U9", scope_id="T1", account_id="B1"),
         "agent:main:slack:channel:T1:B1:C123:U9"),
        (src("discord", "channel", "555", user_id="42", scope_id="G1", account_id="bot"),
         "agent:main:discord:channel:bot:555:42"),
    ],
    ids=["telegram-group", "telegram-thread", "feishu-dm-by-user", "slack-workspace-then-account", "discord-guild-not-keyed"],
)
def test_the_account_follows_the_chat_type_and_any_slack_workspace(source: SessionSource, key: str) -> None:
    assert build_session_key(source) == key


def test_the_shared_flag_does_not_depend_on_the_account() -> None:
    thread = src("telegram", "group", "-100123", user_id="42", thread_id="5")
    without = resolve_routing_key(thread)
    thread.account_id = "7001"
    assert resolve_routing_key(thread).shared is without.shared is True


def test_legacy_account_key_is_the_key_without_the_account() -> None:
    dm = src("weixin", "dm", "u1", user_id="u1", account_id="bot_a")
    legacy = legacy_account_key(dm)
    assert legacy is not None and legacy.key == "agent:main:weixin:dm:u1"
    assert legacy_account_key(src("weixin", "dm", "u1")) is None
    slack = src("slack", "dm", "D1", scope_id="T1", account_id="B1")
    assert legacy_account_key(slack).key == "agent:main:slack:dm:T1:D1"
    # what pre-workspace gateways stored had no account either
    assert legacy_slack_key(slack).key == "agent:main:slack:dm:D1"


def test_an_account_id_obeys_the_id_rule() -> None:
    with pytest.raises(ValueError, match="account_id holds a control character"):
        src("weixin", "dm", "u1", account_id="bot\x1b[31m")
    with pytest.raises(ValueError, match="account_id is only whitespace"):
        src("weixin", "dm", "u1", account_id="   ")
    assert src("weixin", "dm", "u1", account_id=7001).account_id == "7001"


def test_the_account_goes_over_the_wire_only_when_given() -> None:
    named = src("weixin", "dm", "u1", user_id="u1", account_id="bot_a")
    assert named.to_dict()["account_id"] == "bot_a"
    assert SessionSource.from_dict(named.to_dict()) == named
    assert "account_id" not in src("weixin", "dm", "u1").to_dict()
    assert SessionSource.from_dict({"platform": "weixin", "chat_id": "u1"}).account_id is None


IDS = st.none() | st.sampled_from(["", "42", "-100123", "u1", "T1", "5", "a:b"])


@given(
    platform=st.sampled_from([Platform.TELEGRAM, Platform.WEIXIN, Platform.SLACK, Platform.WHATSAPP]),
    chat_type=st.sampled_from([*ChatType, "room"]),
    chat_id=st.sampled_from(["", "42", "-100123", "u1"]),
    user_id=IDS, thread_id=IDS, scope_id=IDS,
    group_per_user=st.booleans(), thread_per_user=st.booleans(),
)
def test_no_account_and_an_empty_account_leave_every_key_as_it_was(
        platform: str, chat_type: str, chat_id: str, user_id: str | None, thread_id: str | None,
        scope_id: str | None, group_per_user: bool, thread_per_user: bool) -> None:
    options = dict(group_sessions_per_user=group_per_user, thread_sessions_per_user=thread_per_user)
    without = src(platform, chat_type, chat_id, user_id=user_id, thread_id=thread_id, scope_id=scope_id)
    empty = src(platform, chat_type, chat_id, user_id=user_id, thread_id=thread_id, scope_id=scope_id,
                account_id="")
    assert resolve_routing_key(without, **options) == resolve_routing_key(empty, **options)
