"""SessionSource: where an inbound message came from, and the platform and chat-type vocabularies.

Routing, isolation and prompt context are all derived from a source, so its fields are kept in a
canonical form whatever the adapter hands in: the platform is a known lower-case name, chat_id is a
string, and every other id is a string or None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable, Mapping

from ..errors import InvalidRequest


class Platform(StrEnum):
    """The built-in platforms. Plugin platforms are plain strings, see register_platform()."""

    LOCAL = "local"
    TELEGRAM = "telegram"
    DISCORD = "discord"
    WHATSAPP = "whatsapp"
    WHATSAPP_CLOUD = "whatsapp_cloud"
    SLACK = "slack"
    SIGNAL = "signal"
    MATTERMOST = "mattermost"
    MATRIX = "matrix"
    HOMEASSISTANT = "homeassistant"
    EMAIL = "email"
    SMS = "sms"
    DINGTALK = "dingtalk"
    API_SERVER = "api_server"
    WEBHOOK = "webhook"
    MSGRAPH_WEBHOOK = "msgraph_webhook"
    FEISHU = "feishu"
    WECOM = "wecom"
    WECOM_CALLBACK = "wecom_callback"
    WEIXIN = "weixin"
    BLUEBUBBLES = "bluebubbles"
    QQBOT = "qqbot"
    YUANBAO = "yuanbao"
    RELAY = "relay"


class ChatType(StrEnum):
    """The built-in chat types. Any other non-empty string is accepted and kept verbatim
    (LINE's multi-person chats arrive as "room")."""

    DM = "dm"
    GROUP = "group"
    CHANNEL = "channel"
    THREAD = "thread"


# Hermes 0.19.0's bundled plugin platforms (plugins/platforms/<name>/): created on demand there,
# known by default here, so a migrated home's sources and keys load without a registration step.
BUNDLED_PLUGIN_PLATFORMS = frozenset(
    {"google_chat", "irc", "line", "ntfy", "photon", "raft", "simplex", "teams"}
)
_BUILT_IN_PLATFORMS = frozenset(p.value for p in Platform) | BUNDLED_PLUGIN_PLATFORMS
_registered_platforms: set[str] = set()
# Plugin names end up inside session keys, so they are restricted to a plain identifier shape.
_PLUGIN_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")


def register_platform(name: str) -> str:
    """Accept a plugin platform name from now on; returns the name as sources will store it."""
    normalised = str(name).strip().lower()
    if not _PLUGIN_NAME.fullmatch(normalised):
        raise ValueError(f"invalid platform name {name!r}: use letters, digits, '_', '.', '-'")
    _registered_platforms.add(normalised)
    return normalised


def known_platforms() -> frozenset[str]:
    return _BUILT_IN_PLATFORMS | _registered_platforms


def _platform_name(value: Any) -> str:
    raw = getattr(value, "value", value)  # a Platform member, or another gateway's platform enum
    if not isinstance(raw, str):
        raise TypeError(f"platform must be a string or Platform, not {type(value).__name__}")
    name = raw.strip().lower()
    if name in _BUILT_IN_PLATFORMS or name in _registered_platforms:
        return name
    known = ", ".join(sorted(known_platforms()))
    raise InvalidRequest(f"unknown platform {quoted(name)} (known: {known})")


def _chat_type_name(value: Any) -> str:
    raw = getattr(value, "value", value)
    if not isinstance(raw, str) or not raw:
        raise InvalidRequest(f"chat_type must be a non-empty string, not {quoted(value)}")
    return raw


# Ids end up in keys, file names, logs and terminals: no control characters, a bounded length.
MAX_ID_LENGTH = 1024
QUOTE_LIMIT = 80  # an error message quotes at most this much of a bad value
CONTROL_CHARACTERS = "\x00-\x1f\x7f-\x9f"  # C0, DEL and C1, as a regex character range (the CLI shows them)
_CONTROL = re.compile(f"[{CONTROL_CHARACTERS}]")


def quoted(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """repr() of a bad value for an error message, cut to `limit` characters (a 10 MB id must not
    become a 10 MB error line)."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text)} characters)"


def require_str(name: str, value: Any) -> str:
    """`value`, when it is a string; else InvalidRequest naming `name` and the type given (a
    None or an int id is refused here, not looked up and found wanting)."""
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a string, not {type(value).__name__}")
    return value


def check_id(name: str, value: str) -> str:
    """The one rule for ids: at most MAX_ID_LENGTH characters, no control characters (NUL, ESC, BEL,
    newlines, ...), and not whitespace only. Empty is allowed here; keys say where an id is needed."""
    if len(value) > MAX_ID_LENGTH:
        raise InvalidRequest(f"{name} is {len(value)} characters long (at most {MAX_ID_LENGTH}): {quoted(value)}")
    if _CONTROL.search(value):
        raise InvalidRequest(f"{name} holds a control character: {quoted(value)}")
    if value and not value.strip():
        raise InvalidRequest(f"{name} is only whitespace: {quoted(value)}")
    return value


# A session id also names files (Hermes' sessions/<id>.jsonl, exports) and sits in URLs and markup:
# beyond the id rule, Hermes' own rule for ids it loads (no "..", "/", "\", drive prefix) and no
# markup characters.
_UNSAFE_SESSION_ID = re.compile(r"\.\.|[/\\<>\"'&]|^[A-Za-z]:")


def check_session_id(value: str) -> str:
    """The rule for a session id that comes from outside (an import): check_id's, not empty, and
    nothing that could be read as a path or as markup."""
    check_id("session_id", value)
    if not value:
        raise InvalidRequest("session_id is empty")
    unsafe = _UNSAFE_SESSION_ID.search(value)
    if unsafe:
        raise InvalidRequest(f"session_id holds {unsafe.group()!r} (a path or markup): {quoted(value)}")
    return value


def _required_id(name: str) -> Callable[[Any], str]:
    return lambda value: check_id(name, "" if value is None else str(value))


def _optional_id(name: str) -> Callable[[Any], str | None]:
    return lambda value: None if value is None else check_id(name, str(value))


# Applied on every assignment, not only in __init__, so a mutated source keeps its invariants
# and key building can rely on them.
_NORMALISERS: Mapping[str, Callable[[Any], Any]] = {
    "platform": _platform_name,
    "chat_type": _chat_type_name,
    "chat_id": _required_id("chat_id"),
    **{
        name: _optional_id(name)
        for name in (
            "user_id", "thread_id", "user_id_alt", "chat_id_alt", "scope_id", "guild_id",
            "parent_chat_id", "message_id", "profile", "prospective_thread_id", "account_id",
        )
    },
}

# Wire layout of to_dict(): always-present fields, then truthy-only ones around the scope pair.
_ALWAYS_FIELDS = ("chat_id", "chat_name", "chat_type", "user_id", "user_name", "thread_id", "chat_topic")
_OPTIONAL_BEFORE_SCOPE = ("user_id_alt", "chat_id_alt")
_OPTIONAL_AFTER_SCOPE = ("parent_chat_id", "message_id", "profile")
_OPTIONAL_TAIL = ("auto_thread_initial_name", "prospective_thread_id", "account_id")
# Every name from_dict reads; the trust flags (role_authorized, delivered_via_upstream_relay) are
# never read from outside.
DICT_FIELDS = frozenset(("platform", "scope_id", "guild_id", "auto_thread_created", *_ALWAYS_FIELDS,
                         *_OPTIONAL_BEFORE_SCOPE, *_OPTIONAL_AFTER_SCOPE, *_OPTIONAL_TAIL))
_DESCRIPTION_PREFIX = {ChatType.GROUP.value: "group: ", ChatType.CHANNEL.value: "channel: "}


@dataclass
class SessionSource:
    """The origin of one inbound message (mutable, like the gateway's own)."""

    platform: str
    chat_id: str
    chat_name: str | None = None
    chat_type: str = ChatType.DM.value
    user_id: str | None = None
    user_name: str | None = None
    thread_id: str | None = None
    chat_topic: str | None = None
    user_id_alt: str | None = None  # stable alternate sender id; wins over user_id for isolation
    chat_id_alt: str | None = None
    is_bot: bool = False
    scope_id: str | None = None  # Discord guild / Slack workspace / Matrix server
    guild_id: str | None = None  # deprecated alias of scope_id
    parent_chat_id: str | None = None
    message_id: str | None = None
    role_authorized: bool = False
    profile: str | None = None
    profile_route_rejected: bool = field(default=False, repr=False, compare=False)
    auto_thread_created: bool = False
    auto_thread_initial_name: str | None = None
    # The thread a channel message will be auto-threaded into, so that message and the later
    # in-thread follow-ups share one session.
    prospective_thread_id: str | None = None
    # Trust flag set by the authenticated relay transport; never serialised, so a peer cannot forge it.
    delivered_via_upstream_relay: bool = False
    # The gateway's bot account the message arrived on (a second WeChat account, another Telegram
    # bot); when given it is part of the key, so one person's chats with two bots stay apart.
    account_id: str | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        normalise = _NORMALISERS.get(name)
        object.__setattr__(self, name, value if normalise is None else normalise(value))

    def __post_init__(self) -> None:
        # Readers of either name must agree; scope_id wins on conflict.
        if self.scope_id is None and self.guild_id is not None:
            self.scope_id = self.guild_id
        elif self.scope_id is not None:
            self.guild_id = self.scope_id

    @property
    def description(self) -> str:
        """Human-readable origin, for the prompt's session context."""
        if self.platform == Platform.LOCAL:
            return "CLI terminal"
        if self.chat_type == ChatType.DM:
            text = f"DM with {self.user_name or self.user_id or 'user'}"
        else:
            text = _DESCRIPTION_PREFIX.get(self.chat_type, "") + (self.chat_name or self.chat_id)
        return f"{text}, thread: {self.thread_id}" if self.thread_id else text

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"platform": self.platform}
        data.update((name, getattr(self, name)) for name in _ALWAYS_FIELDS)
        self._put_truthy(data, _OPTIONAL_BEFORE_SCOPE)
        scope = self.scope_id if self.scope_id is not None else self.guild_id
        if scope:
            data["scope_id"] = data["guild_id"] = scope
        self._put_truthy(data, _OPTIONAL_AFTER_SCOPE)
        if self.auto_thread_created:
            data["auto_thread_created"] = True
        self._put_truthy(data, _OPTIONAL_TAIL)
        return data

    def _put_truthy(self, data: dict[str, Any], names: tuple[str, ...]) -> None:
        for name in names:
            value = getattr(self, name)
            if value:
                data[name] = value

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionSource:
        copied: dict[str, Any] = {
            name: data.get(name)
            for name in (*_ALWAYS_FIELDS, *_OPTIONAL_BEFORE_SCOPE, *_OPTIONAL_AFTER_SCOPE, *_OPTIONAL_TAIL)
        }
        copied["chat_id"] = data["chat_id"]
        copied["chat_type"] = data.get("chat_type") or ChatType.DM.value
        scope = data.get("scope_id")
        return cls(
            platform=data["platform"],
            scope_id=scope if scope is not None else data.get("guild_id"),
            auto_thread_created=bool(data.get("auto_thread_created", False)),
            **copied,
        )
