"""Routing keys: the worked examples of the spec (§2.7, newer design), route ids, WhatsApp ids."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnlog.domain.keys import (
    TURNLOG_NAMESPACE,
    RoutingKey,
    build_session_key,
    canonical_whatsapp_identifier,
    is_shared_multi_user_session,
    legacy_slack_key,
    resolve_routing_key,
)
from turnlog.domain.source import ChatType, Platform, SessionSource

PHONE = "15551234567"
LID = "999999999999999"
ALIAS_MAPPING = {LID: [PHONE], PHONE: [LID]}


def write_lid_mapping(directory: Path, phone: str, lid: str) -> None:
    """The WhatsApp bridge's layout: phone -> lid, and lid -> phone in the _reverse file."""
    (directory / f"lid-mapping-{phone}.json").write_text(json.dumps(lid))
    (directory / f"lid-mapping-{lid}_reverse.json").write_text(json.dumps(phone))


def age_directory(directory: Path, seconds_ago: int = 3600) -> None:
    """Give the directory an old mtime, as a settled bridge session directory has."""
    stamp = os.stat(directory).st_mtime_ns - seconds_ago * 1_000_000_000
    os.utime(directory, ns=(stamp, stamp))


@pytest.fixture(scope="module")
def alias_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("whatsapp-session")
    write_lid_mapping(directory, PHONE, LID)
    # Noise the bridge directory may hold: none of it may break key building.
    (directory / "lid-mapping-123_reverse.json").write_text("{not json")
    (directory / "lid-mapping-456.json").write_text(json.dumps({"not": "a string"}))
    (directory / "lid-mapping-789.json").mkdir()
    (directory / "lid-mapping-321.json").write_bytes(b"\xff\xfe\x00garbage")
    return directory


@pytest.fixture(params=["directory", "mapping"])
def aliases(request: pytest.FixtureRequest, alias_directory: Path) -> object:
    return alias_directory if request.param == "directory" else ALIAS_MAPPING


def src(platform: str, chat_type: str, chat_id: str = "", **fields: str) -> SessionSource:
    return SessionSource(platform=platform, chat_id=chat_id, chat_type=chat_type, **fields)


GROUP_SHARED = {"group_sessions_per_user": False}
THREAD_PER_USER = {"thread_sessions_per_user": True}
WA_GROUP = "120363000000@g.us"

# (id, source, options, key, shared)
WORKED_EXAMPLES = [
    ("ex1", src("telegram", "dm", "12345", user_id="12345"), {}, "agent:main:telegram:dm:12345", False),
    ("ex2", src("telegram", "dm", "12345", thread_id="77"), {}, "agent:main:telegram:dm:12345:77", False),
    ("ex3", src("signal", "dm", user_id="+15550001"), {}, "agent:main:signal:dm:+15550001", False),
    ("ex4", src("signal", "dm", user_id="+15550001", user_id_alt="uuid-abc"), {},
     "agent:main:signal:dm:uuid-abc", False),
    ("ex5", src("signal", "dm", user_id="u1", thread_id="t9"), {}, "agent:main:signal:dm:u1:t9", False),
    ("ex6", src("signal", "dm", thread_id="t9"), {}, "agent:main:signal:dm:t9", False),
    ("ex7", src("signal", "dm"), {}, "agent:main:signal:dm", False),
    ("ex8", src("telegram", "group", "-100123", user_id="42"), {},
     "agent:main:telegram:group:-100123:42", False),
    ("ex9", src("telegram", "group", "-100123", user_id="42"), GROUP_SHARED,
     "agent:main:telegram:group:-100123", True),
    ("ex10", src("telegram", "group", "-100123"), {}, "agent:main:telegram:group:-100123", True),
    ("ex11", src("feishu", "group", "oc_1", user_id="ou_1", user_id_alt="on_union"), {},
     "agent:main:feishu:group:oc_1:on_union", False),
    ("ex12", src("discord", "thread", "555", thread_id="888", user_id="42"), {},
     "agent:main:discord:thread:555:888", True),
    ("ex13", src("telegram", "group", "-100123", thread_id="5", user_id="42"), {},
     "agent:main:telegram:group:-100123:5", True),
    ("ex14", src("telegram", "group", "-100123", thread_id="5", user_id="42"), THREAD_PER_USER,
     "agent:main:telegram:group:-100123:5:42", False),
    ("ex15", src("telegram", "group", "-100123", thread_id="5", user_id="42"),
     {**GROUP_SHARED, **THREAD_PER_USER}, "agent:main:telegram:group:-100123:5", True),
    ("ex16", src("slack", "channel", "C123", user_id="U9"), {}, "agent:main:slack:channel:C123:U9", False),
    ("ex17", src("slack", "channel", "C123", user_id="U9", scope_id="T1"), {},
     "agent:main:slack:channel:T1:C123:U9", False),
    ("ex18", src("slack", "channel", "C123", thread_id="1700000000.1234", scope_id="T1"), {},
     "agent:main:slack:channel:T1:C123:1700000000.1234", True),
    ("ex19", src("slack", "dm", "D1", scope_id="T1"), {}, "agent:main:slack:dm:T1:D1", False),
    ("ex20", src("telegram", "group", user_id="42"), {}, "agent:main:telegram:group:42", False),
    ("ex21", src("telegram", "group"), {}, "agent:main:telegram:group", True),
    ("ex22", src("whatsapp", "dm", f"{PHONE}@s.whatsapp.net"), {}, f"agent:main:whatsapp:dm:{PHONE}", False),
    ("ex23", src("whatsapp", "dm", f"{LID}@lid"), {}, f"agent:main:whatsapp:dm:{PHONE}", False),
    ("ex24", src("whatsapp", "dm", f"{PHONE}:47@s.whatsapp.net"), {}, f"agent:main:whatsapp:dm:{PHONE}", False),
    ("ex25", src("whatsapp", "dm", f"+{PHONE}"), {}, f"agent:main:whatsapp:dm:{PHONE}", False),
    ("ex26", src("whatsapp", "dm", "123456789012345@lid"), {},
     "agent:main:whatsapp:dm:123456789012345", False),
    ("ex27", src("whatsapp", "group", WA_GROUP, user_id=f"{LID}@lid"), {},
     f"agent:main:whatsapp:group:{WA_GROUP}:{PHONE}", False),
    ("ex28", src("whatsapp", "group", WA_GROUP, user_id=f"{PHONE}@s.whatsapp.net"), {},
     f"agent:main:whatsapp:group:{WA_GROUP}:{PHONE}", False),
    ("ex29", src("whatsapp", "dm", user_id=f"{LID}@lid"), {}, f"agent:main:whatsapp:dm:{PHONE}", False),
    ("ex30", src("whatsapp", "dm", "@s.whatsapp.net", user_id=f"{PHONE}@s.whatsapp.net"), {},
     f"agent:main:whatsapp:dm:{PHONE}", False),
    ("ex31", src("whatsapp", "dm", "+1 555 123 4567"), {}, f"agent:main:whatsapp:dm:{PHONE}", False),
    ("ex32", src("telegram", "dm", f"{PHONE}@s.whatsapp.net"), {},
     f"agent:main:telegram:dm:{PHONE}@s.whatsapp.net", False),
    ("ex33", src("telegram", "dm", "12345"), {"profile": "coder"}, "agent:coder:telegram:dm:12345", False),
    ("ex34", src("telegram", "dm", "12345"), {"profile": "main"}, "agent:main~:telegram:dm:12345", False),
    ("ex34-default", src("telegram", "dm", "12345"), {"profile": "default"},
     "agent:main:telegram:dm:12345", False),
    ("ex35", src("weixin", "dm", "wxid_abc", user_id="wxid_abc"), {}, "agent:main:weixin:dm:wxid_abc", False),
    ("ex36", src("weixin", "group", "room1@chatroom", user_id="wxid_abc"), {},
     "agent:main:weixin:group:room1@chatroom:wxid_abc", False),
    ("ex37", src("api_server", "group", "spaces/AAA", thread_id="spaces/AAA/threads/BBB", user_id="users/1"),
     {}, "agent:main:api_server:group:spaces/AAA:spaces/AAA/threads/BBB", True),
    ("ex38", src("local", "dm", "cli"), {}, "agent:main:local:dm:cli", False),
    ("ex39", src("telegram", "forum", "-100", user_id="42"), {}, "agent:main:telegram:forum:-100:42", False),
    ("ex40", src("discord", "thread", thread_id="888", user_id="42"), {}, "agent:main:discord:thread:888", True),
    ("ex41", src("discord", "channel", "555", guild_id="G1", user_id="42"), {},
     "agent:main:discord:channel:555:42", False),
    ("N1", src("slack", "channel", "C123", user_id="U9", scope_id="T1"), {},
     "agent:main:slack:channel:T1:C123:U9", False),
    ("N2", src("slack", "channel", "C123", thread_id="1700000000.1234", scope_id="T1"), {},
     "agent:main:slack:channel:T1:C123:1700000000.1234", True),
    ("N3", src("slack", "dm", "D1", scope_id="T1"), {}, "agent:main:slack:dm:T1:D1", False),
    ("N4", src("discord", "channel", "555", user_id="42", prospective_thread_id="999"), {},
     "agent:main:discord:thread:555:999", True),
    ("N5", src("telegram", "dm", "12345"), {"profile": "main"}, "agent:main~:telegram:dm:12345", False),
]


@pytest.mark.parametrize(
    ("source", "options", "key", "shared"),
    [pytest.param(*row[1:], id=row[0]) for row in WORKED_EXAMPLES],
)
def test_worked_example(
    source: SessionSource, options: dict, key: str, shared: bool, aliases: object
) -> None:
    routing = resolve_routing_key(source, whatsapp_aliases=aliases, **options)
    assert routing.key == key
    assert routing.shared is shared
    assert build_session_key(source, whatsapp_aliases=aliases, **options) == key
    isolation = {name: value for name, value in options.items() if name.endswith("_per_user")}
    assert is_shared_multi_user_session(source, **isolation) is shared


def test_key_string_is_the_parts_joined_and_the_namespace_is_one_part() -> None:
    routing = resolve_routing_key(src("telegram", "group", "-100123", user_id="42"), profile="coder")
    assert routing.parts == ("agent:coder", "telegram", "group", "-100123", "42")
    assert routing.key == ":".join(routing.parts)


def test_prospective_thread_and_the_real_thread_share_one_route() -> None:
    initiating = src("discord", "channel", "555", user_id="42", prospective_thread_id="999")
    follow_up = src("discord", "thread", "555", user_id="7", thread_id="999")
    assert resolve_routing_key(initiating).route_id == resolve_routing_key(follow_up).route_id


def test_a_real_thread_id_wins_over_the_prospective_one() -> None:
    source = src("discord", "thread", "555", thread_id="888", prospective_thread_id="999")
    assert build_session_key(source) == "agent:main:discord:thread:555:888"


def test_dm_ignores_the_prospective_thread() -> None:
    source = src("discord", "dm", "D5", prospective_thread_id="999")
    assert build_session_key(source) == "agent:main:discord:dm:D5"


@pytest.mark.parametrize("profile", ["main", "main~", "main~~", "default", "coder"])
def test_every_profile_gets_its_own_namespace(profile: str) -> None:
    source = src("telegram", "dm", "1")
    others = {"main", "main~", "main~~", "default", "coder"} - {profile}
    mine = resolve_routing_key(source, profile=profile).parts[0]
    assert mine not in {resolve_routing_key(source, profile=other).parts[0] for other in others}
    assert resolve_routing_key(source).parts[0] == "agent:main"


# --- route ids -------------------------------------------------------------------------------


def test_ids_containing_a_colon_share_a_key_string_but_not_a_route() -> None:
    colon_in_chat = src("telegram", "group", "a:b")
    chat_and_thread = src("telegram", "group", "a", thread_id="b")
    first, second = resolve_routing_key(colon_in_chat), resolve_routing_key(chat_and_thread)
    assert first.key == second.key == "agent:main:telegram:group:a:b"
    assert first.parts != second.parts
    assert first.route_id != second.route_id


def test_same_conversation_reached_two_ways_is_one_route() -> None:
    by_sender = src("signal", "dm", "", user_id="X")
    by_chat = src("signal", "dm", "X")
    assert resolve_routing_key(by_sender).parts == resolve_routing_key(by_chat).parts
    assert resolve_routing_key(by_sender).route_id == resolve_routing_key(by_chat).route_id


def test_route_id_is_stable_across_releases() -> None:
    # Stored routes are addressed by this id: changing the derivation orphans every one of them.
    routing = RoutingKey(parts=("agent:main", "telegram", "dm", "12345"), shared=False)
    assert str(TURNLOG_NAMESPACE) == "c6f9f7a2-2da9-46eb-82b4-d30049cca430"
    assert str(routing.route_id) == "9d0f5731-2dbe-5522-b819-a726847f17ee"
    again = RoutingKey(parts=("agent:main", "telegram", "dm", "12345"), shared=True)
    assert again.route_id == routing.route_id


# Ids are never whitespace only nor hold control characters (SessionSource refuses them: domain/source.py).
ID_TEXT = st.text(alphabet=st.sampled_from([":", "@", "1", "2", "a", "+", " "]), max_size=4).filter(
    lambda s: not s or s.strip())
OPTIONAL_ID = st.none() | ID_TEXT
CHAT_TYPES = st.sampled_from([*ChatType, "forum"])
PLATFORMS = st.sampled_from(list(Platform))


@st.composite
def sources(draw: st.DrawFn, ids: st.SearchStrategy = ID_TEXT) -> SessionSource:
    optional = st.none() | ids
    return SessionSource(
        platform=draw(PLATFORMS),
        chat_id=draw(ids),
        chat_type=draw(CHAT_TYPES),
        user_id=draw(optional),
        user_id_alt=draw(optional),
        thread_id=draw(optional),
        scope_id=draw(optional),
        prospective_thread_id=draw(optional),
    )


OPTIONS = st.fixed_dictionaries(
    {
        "group_sessions_per_user": st.booleans(),
        "thread_sessions_per_user": st.booleans(),
        "profile": st.none() | st.sampled_from(["default", "main", "coder", "a:b", "a"]),
    }
)


@given(first=sources(), second=sources(), options=OPTIONS)
def test_different_key_strings_never_share_a_route(
    first: SessionSource, second: SessionSource, options: dict
) -> None:
    one, other = resolve_routing_key(first, **options), resolve_routing_key(second, **options)
    if build_session_key(first, **options) != build_session_key(second, **options):
        assert one.route_id != other.route_id
    assert (one.route_id == other.route_id) == (one.parts == other.parts)


@given(source=sources(), options=OPTIONS)
def test_shared_predicate_agrees_with_the_key(source: SessionSource, options: dict) -> None:
    isolation = {name: value for name, value in options.items() if name.endswith("_per_user")}
    routing = resolve_routing_key(source, **options)
    assert is_shared_multi_user_session(source, **isolation) == routing.shared
    if routing.shared and (source.user_id_alt or source.user_id):
        # Shared means no sender in the key: another sender in the same chat gets the same route.
        other = SessionSource.from_dict({**source.to_dict(), "user_id": "someone-else", "user_id_alt": None})
        assert resolve_routing_key(other, **options).parts == routing.parts


ANY_TEXT = st.text(st.characters(exclude_categories=("Cc",)), max_size=30).filter(lambda s: not s or s.strip())


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=300)
@given(source=sources(ANY_TEXT), options=OPTIONS, use_aliases=st.booleans())
def test_key_building_never_raises(
    source: SessionSource, options: dict, use_aliases: bool, alias_directory: Path
) -> None:
    aliases = alias_directory if use_aliases else None
    routing = resolve_routing_key(source, whatsapp_aliases=aliases, **options)
    assert routing.key == build_session_key(source, whatsapp_aliases=aliases, **options)
    assert routing.route_id.version == 5
    legacy_slack_key(source, whatsapp_aliases=aliases, **options)


# --- WhatsApp identifiers --------------------------------------------------------------------


@pytest.mark.parametrize(
    "written",
    [
        "+1 555 123 4567",
        "+1-555-123-4567",
        "1.555.123.4567",
        "+1 (555) 123-4567",
        "１５５５１２３４５６７",
        "＋１ ５５５ １２３ ４５６７",
        f" {PHONE}:12@s.whatsapp.net ",
    ],
)
def test_human_spellings_of_a_phone_number_canonicalise_to_bare_digits(written: str) -> None:
    assert canonical_whatsapp_identifier(written) == PHONE


def test_identifiers_that_are_not_phone_numbers_are_kept() -> None:
    assert canonical_whatsapp_identifier("hello world") == "hello world"
    # An old-style group id is two numbers joined by a dash, too long to be one phone number.
    assert canonical_whatsapp_identifier("15551234567-1609459200@g.us") == "15551234567-1609459200"


def test_aliases_resolve_to_the_shortest_then_first_identifier() -> None:
    mapping = {"22222": ["11111", "333333"], "11111": ["22222"], "333333": ["22222"]}
    for identifier in mapping:
        assert canonical_whatsapp_identifier(identifier, mapping) == "11111"


def test_corrupt_mapping_files_are_skipped(alias_directory: Path) -> None:
    for identifier in ("123", "456", "789", "321"):
        assert canonical_whatsapp_identifier(f"{identifier}@lid", alias_directory) == identifier


def test_missing_alias_directory_means_no_aliases(tmp_path: Path) -> None:
    assert canonical_whatsapp_identifier(f"{LID}@lid", tmp_path / "absent") == LID


def test_alias_directory_reads_follow_the_directory_mtime(tmp_path: Path) -> None:
    write_lid_mapping(tmp_path, PHONE, LID)
    age_directory(tmp_path)
    assert canonical_whatsapp_identifier(LID, tmp_path) == PHONE

    # Rewriting a file in place leaves the directory mtime alone: the cached answer stands.
    (tmp_path / f"lid-mapping-{LID}_reverse.json").write_text(json.dumps("4477"))
    assert canonical_whatsapp_identifier(LID, tmp_path) == PHONE

    # Files the bridge adds or replaces change the directory mtime: the cache is dropped.
    (tmp_path / "lid-mapping-4477.json").write_text(json.dumps(LID))
    age_directory(tmp_path, seconds_ago=1800)
    assert canonical_whatsapp_identifier(LID, tmp_path) == "4477"


def test_a_freshly_changed_directory_is_read_again(tmp_path: Path) -> None:
    write_lid_mapping(tmp_path, PHONE, LID)
    assert canonical_whatsapp_identifier(LID, tmp_path) == PHONE
    (tmp_path / f"lid-mapping-{LID}_reverse.json").write_text(json.dumps("4477"))
    assert canonical_whatsapp_identifier(LID, tmp_path) == "4477"


def test_no_filesystem_access_without_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    touched: list[str] = []

    def recording(name: str, real: Callable[..., object]) -> Callable[..., object]:
        def call(*args: object, **kwargs: object) -> object:
            touched.append(name)
            return real(*args, **kwargs)
        return call

    source = src("whatsapp", "group", WA_GROUP, user_id=f"{LID}@lid")
    with monkeypatch.context() as patched:
        patched.setattr("builtins.open", recording("open", open))
        patched.setattr(os, "stat", recording("stat", os.stat))
        key = build_session_key(source)
    assert key == f"agent:main:whatsapp:group:{WA_GROUP}:{LID}"
    assert touched == []


# --- legacy Slack keys -----------------------------------------------------------------------


def test_legacy_slack_key_is_the_key_without_the_workspace() -> None:
    channel = src("slack", "channel", "C123", user_id="U9", scope_id="T1")
    legacy = legacy_slack_key(channel)
    assert legacy is not None
    assert legacy.key == "agent:main:slack:channel:C123:U9"
    assert legacy.shared is False
    dm = legacy_slack_key(src("slack", "dm", "D1", scope_id="T1"), profile="coder")
    assert dm is not None and dm.key == "agent:coder:slack:dm:D1"
    thread = legacy_slack_key(src("slack", "channel", "C1", thread_id="1.2", scope_id="T1"))
    assert thread is not None and thread.key == "agent:main:slack:channel:C1:1.2" and thread.shared


def test_legacy_slack_key_equals_the_key_an_unscoped_source_gets() -> None:
    scoped = src("slack", "group", "C9", user_id="U1", scope_id="T1")
    unscoped = src("slack", "group", "C9", user_id="U1")
    legacy = legacy_slack_key(scoped)
    assert legacy == resolve_routing_key(unscoped)
    assert legacy.route_id != resolve_routing_key(scoped).route_id


@pytest.mark.parametrize(
    "source",
    [
        src("slack", "channel", "C123", user_id="U9"),
        src("discord", "channel", "555", guild_id="G1", user_id="42"),
        src("matrix", "group", "!room", scope_id="example.org"),
    ],
    ids=["slack-unscoped", "discord-guild", "matrix-server"],
)
def test_legacy_slack_key_only_exists_for_scoped_slack(source: SessionSource) -> None:
    assert legacy_slack_key(source) is None
