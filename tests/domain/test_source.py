"""SessionSource: canonical fields, scope mirroring, the wire form and the description (docs/behaviour.md §1)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnlog.domain.source import ChatType, Platform, SessionSource, register_platform


def test_platform_is_stored_as_its_lower_case_name() -> None:
    assert SessionSource(platform="Telegram", chat_id="1").platform == "telegram"
    assert SessionSource(platform=Platform.SLACK, chat_id="1").platform == "slack"
    assert type(SessionSource(platform=Platform.SLACK, chat_id="1").platform) is str
    assert SessionSource(platform=" WhatsApp_Cloud ", chat_id="1").platform == Platform.WHATSAPP_CLOUD


def test_unknown_platform_is_refused_with_the_known_names() -> None:
    with pytest.raises(ValueError, match=r"unknown platform 'xyz' \(known: .*telegram.*\)"):
        SessionSource(platform="XYZ", chat_id="1")


def test_a_registered_plugin_platform_is_accepted_case_insensitively() -> None:
    with pytest.raises(ValueError):
        SessionSource(platform="turnlog_test_chat", chat_id="1")
    assert register_platform("TurnLog_Test_Chat") == "turnlog_test_chat"
    assert SessionSource(platform="TURNLOG_TEST_CHAT", chat_id="1").platform == "turnlog_test_chat"


@pytest.mark.parametrize("name", ["", "a:b", "has space"])
def test_platform_names_that_would_corrupt_keys_cannot_be_registered(name: str) -> None:
    with pytest.raises(ValueError):
        register_platform(name)


def test_mutating_the_platform_is_validated_too() -> None:
    source = SessionSource(platform="telegram", chat_id="1")
    with pytest.raises(ValueError, match="unknown platform"):
        source.platform = "nope"
    source.platform = "SIGNAL"
    assert source.platform == "signal"


def test_chat_type_defaults_to_dm_and_keeps_other_strings_verbatim() -> None:
    assert SessionSource(platform="telegram", chat_id="1").chat_type == "dm"
    assert SessionSource(platform="telegram", chat_id="1", chat_type=ChatType.THREAD).chat_type == "thread"
    assert SessionSource(platform="telegram", chat_id="1", chat_type="Forum").chat_type == "Forum"
    with pytest.raises(ValueError):
        SessionSource(platform="telegram", chat_id="1", chat_type="")


def test_ids_are_strings() -> None:
    source = SessionSource(platform="telegram", chat_id=-100123, user_id=42, thread_id=5)  # type: ignore[arg-type]
    assert (source.chat_id, source.user_id, source.thread_id) == ("-100123", "42", "5")
    assert SessionSource(platform="telegram", chat_id=None).chat_id == ""  # type: ignore[arg-type]
    assert SessionSource(platform="telegram", chat_id="1").user_id is None


@pytest.mark.parametrize(
    ("scope_id", "guild_id", "expected"),
    [("G1", None, "G1"), (None, "G1", "G1"), ("S2", "G1", "S2"), (None, None, None)],
    ids=["scope-only", "guild-only", "scope-wins", "neither"],
)
def test_scope_and_guild_mirror_each_other(scope_id: str | None, guild_id: str | None, expected: str | None) -> None:
    source = SessionSource(platform="discord", chat_id="555", scope_id=scope_id, guild_id=guild_id)
    assert (source.scope_id, source.guild_id) == (expected, expected)


def test_to_dict_emits_the_always_fields_and_nothing_falsy_else() -> None:
    source = SessionSource(platform="telegram", chat_id="12345", is_bot=True, role_authorized=True,
                           user_id_alt="", delivered_via_upstream_relay=True, profile_route_rejected=True)
    assert source.to_dict() == {
        "platform": "telegram", "chat_id": "12345", "chat_name": None, "chat_type": "dm",
        "user_id": None, "user_name": None, "thread_id": None, "chat_topic": None,
    }


def test_to_dict_with_every_field_in_wire_order() -> None:
    source = SessionSource(
        platform="discord", chat_id="555", chat_name="general", chat_type="channel", user_id="42",
        user_name="ann", thread_id="888", chat_topic="talk", user_id_alt="alt", chat_id_alt="calt",
        guild_id="G1", parent_chat_id="500", message_id="m1", profile="coder",
        auto_thread_created=True, auto_thread_initial_name="Hello", prospective_thread_id="999",
    )
    data = source.to_dict()
    assert list(data) == [
        "platform", "chat_id", "chat_name", "chat_type", "user_id", "user_name", "thread_id", "chat_topic",
        "user_id_alt", "chat_id_alt", "scope_id", "guild_id", "parent_chat_id", "message_id", "profile",
        "auto_thread_created", "auto_thread_initial_name", "prospective_thread_id",
    ]
    assert data["scope_id"] == data["guild_id"] == "G1"
    assert data["auto_thread_created"] is True


def test_from_dict_fills_defaults_and_reads_the_legacy_guild_id() -> None:
    source = SessionSource.from_dict({"platform": "Discord", "chat_id": 555, "guild_id": "G1"})
    assert source.platform == "discord"
    assert source.chat_id == "555"
    assert source.chat_type == "dm"
    assert (source.scope_id, source.guild_id) == ("G1", "G1")
    prefer_scope = SessionSource.from_dict({"platform": "slack", "chat_id": "C", "scope_id": "T1", "guild_id": "X"})
    assert prefer_scope.scope_id == "T1"


def test_trust_flags_never_come_back_from_the_wire() -> None:
    forged = {"platform": "discord", "chat_id": "1", "delivered_via_upstream_relay": True,
              "is_bot": True, "role_authorized": True, "profile_route_rejected": True}
    source = SessionSource.from_dict(forged)
    assert not (source.delivered_via_upstream_relay or source.is_bot or source.role_authorized
                or source.profile_route_rejected)


def test_from_dict_refuses_an_unknown_platform() -> None:
    with pytest.raises(ValueError, match="unknown platform"):
        SessionSource.from_dict({"platform": "myspace", "chat_id": "1"})


# Ids hold no control characters and are not whitespace only (domain/source.py check_id).
ID_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cc",)), max_size=8).filter(
    lambda s: not s or s.strip())
OPTIONAL_TEXT = st.none() | ID_TEXT.filter(bool)


@given(
    platform=st.sampled_from(list(Platform)),
    chat_id=ID_TEXT,
    chat_type=st.sampled_from([*ChatType, "forum"]),
    texts=st.fixed_dictionaries({
        name: OPTIONAL_TEXT
        for name in ("chat_name", "user_id", "user_name", "thread_id", "chat_topic", "user_id_alt",
                     "chat_id_alt", "scope_id", "parent_chat_id", "message_id", "profile",
                     "auto_thread_initial_name", "prospective_thread_id")
    }),
    auto_thread_created=st.booleans(),
)
def test_wire_round_trip(platform: Platform, chat_id: str, chat_type: str, texts: dict,
                         auto_thread_created: bool) -> None:
    source = SessionSource(platform=platform, chat_id=chat_id, chat_type=chat_type,
                           auto_thread_created=auto_thread_created, **texts)
    assert SessionSource.from_dict(source.to_dict()) == source


@pytest.mark.parametrize(
    ("source", "text"),
    [
        (SessionSource(platform="telegram", chat_id="-1", chat_type="group", chat_name="My Group", thread_id="12345"),
         "group: My Group, thread: 12345"),
        (SessionSource(platform="telegram", chat_id="42", user_id="42"), "DM with 42"),
        (SessionSource(platform="telegram", chat_id="42", user_id="42", user_name="Ann"), "DM with Ann"),
        (SessionSource(platform="signal", chat_id=""), "DM with user"),
        (SessionSource(platform="discord", chat_id="T1", chat_type="thread"), "T1"),
        (SessionSource(platform="slack", chat_id="C1", chat_type="channel"), "channel: C1"),
        (SessionSource(platform="local", chat_id="cli", chat_type="group", thread_id="x"), "CLI terminal"),
    ],
    ids=["group-thread", "dm-user-id", "dm-user-name", "dm-nobody", "thread-no-name", "channel", "local"],
)
def test_description(source: SessionSource, text: str) -> None:
    assert source.description == text
