"""Routing keys: the single source of truth for which conversation a message belongs to.

A key is a tuple of parts. Its string form (parts joined with ":") is the Hermes-compatible
session_key; its route_id is derived from the parts themselves, so two sources whose ids contain
":" can share a key string without sharing a route.

Layout (Hermes rules, newer design):
    dm:      <ns>:<platform>:dm[:<slack scope>][:<account>][:<chat or participant>][:<thread>]
    other:   <ns>:<platform>:<chat_type>[:<slack scope>][:<account>][:<chat>][:<thread>][:<participant>]

The account (the gateway's bot a message arrived on) is there only when the source names one, so
every key of a source without it is the key it always was.
"""

from __future__ import annotations

import json
import os
import re
import time
import unicodedata
import uuid
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Union

from ..errors import InvalidRequest
from .source import ChatType, Platform, SessionSource

# Fixed forever: route ids of every stored route are derived from it.
TURNLOG_NAMESPACE = uuid.UUID("c6f9f7a2-2da9-46eb-82b4-d30049cca430")

WhatsAppAliases = Union[None, str, "os.PathLike[str]", Mapping[str, Iterable[str]]]


@dataclass(frozen=True)
class RoutingKey:
    parts: tuple[str, ...]
    shared: bool  # no sender in the key: everyone in the chat shares this session

    @cached_property
    def key(self) -> str:
        return ":".join(self.parts)

    @cached_property
    def route_id(self) -> uuid.UUID:
        return _route_id(self.parts)


@lru_cache(maxsize=65536)
def _route_id(parts: tuple[str, ...]) -> uuid.UUID:
    # ensure_ascii keeps the name encodable even for ids holding lone surrogates.
    name = "route:" + json.dumps(list(parts), ensure_ascii=True, separators=(",", ":"))
    return uuid.uuid5(TURNLOG_NAMESPACE, name)


def resolve_routing_key(
    source: SessionSource,
    *,
    group_sessions_per_user: bool = True,
    thread_sessions_per_user: bool = False,
    profile: str | None = None,
    whatsapp_aliases: WhatsAppAliases = None,
) -> RoutingKey:
    return _resolve(
        source, group_sessions_per_user, thread_sessions_per_user, profile, whatsapp_aliases,
        with_slack_scope=True,
    )


def require_conversation(source: SessionSource) -> None:
    """What the engine routes must name its conversation. The key rules give an anonymous source a
    shared sink (`agent:main:signal:dm`, `agent:main:telegram:group`: docs/behaviour.md §2), so every such
    message of a platform would land in one session; the engine refuses them instead."""
    if source.chat_type == ChatType.DM:
        if not (source.chat_id or source.user_id_alt or source.user_id or source.thread_id):
            raise InvalidRequest(f"a {source.platform} DM needs a chat_id or a user_id (both are empty)")
    elif not (source.chat_id or source.thread_id):
        raise InvalidRequest(f"a {source.platform} {source.chat_type} message needs a chat_id (it is empty)")


def build_session_key(
    source: SessionSource,
    *,
    group_sessions_per_user: bool = True,
    thread_sessions_per_user: bool = False,
    profile: str | None = None,
    whatsapp_aliases: WhatsAppAliases = None,
) -> str:
    return resolve_routing_key(
        source,
        group_sessions_per_user=group_sessions_per_user,
        thread_sessions_per_user=thread_sessions_per_user,
        profile=profile,
        whatsapp_aliases=whatsapp_aliases,
    ).key


def is_shared_multi_user_session(
    source: SessionSource,
    *,
    group_sessions_per_user: bool = True,
    thread_sessions_per_user: bool = False,
) -> bool:
    """True when the key carries no participant, so every sender in the chat shares the session."""
    return resolve_routing_key(
        source,
        group_sessions_per_user=group_sessions_per_user,
        thread_sessions_per_user=thread_sessions_per_user,
    ).shared


def legacy_slack_key(
    source: SessionSource,
    *,
    group_sessions_per_user: bool = True,
    thread_sessions_per_user: bool = False,
    profile: str | None = None,
    whatsapp_aliases: WhatsAppAliases = None,
) -> RoutingKey | None:
    """The pre-workspace key of a scoped Slack source (what older gateways stored, which had no
    accounts either), else None."""
    if source.platform != Platform.SLACK or not source.scope_id:
        return None
    return _resolve(
        source, group_sessions_per_user, thread_sessions_per_user, profile, whatsapp_aliases,
        with_slack_scope=False, with_account=False,
    )


def legacy_account_key(source: SessionSource, **options: Any) -> RoutingKey | None:
    """The key a source naming its bot account had before accounts were known (`options` as for
    resolve_routing_key), else None."""
    if not source.account_id:
        return None
    return resolve_routing_key(replace(source, account_id=None), **options)


def _namespace(profile: str | None) -> str:
    if not profile or profile == "default":
        return "agent:main"
    # A profile named "main" must not share the default namespace; "main~", "main~~", ... each
    # shift by one more "~" so the mapping stays one-to-one.
    if profile.rstrip("~") == "main":
        return f"agent:{profile}~"
    return f"agent:{profile}"


def _resolve(
    source: SessionSource,
    group_sessions_per_user: bool,
    thread_sessions_per_user: bool,
    profile: str | None,
    whatsapp_aliases: WhatsAppAliases,
    *,
    with_slack_scope: bool,
    with_account: bool = True,
) -> RoutingKey:
    platform = source.platform
    slack_scope = source.scope_id if with_slack_scope and platform == Platform.SLACK else None
    # Where the conversation lives: the Slack workspace, then the bot account it reached.
    scopes = [scope for scope in (slack_scope, source.account_id if with_account else None) if scope]
    parts = [_namespace(profile), platform]

    if source.chat_type == ChatType.DM:
        # A DM is one person's conversation: never shared, never suffixed with the sender.
        parts.append(ChatType.DM.value)
        parts.extend(scopes)
        chat = source.chat_id
        if chat and platform == Platform.WHATSAPP:
            chat = canonical_whatsapp_identifier(chat, whatsapp_aliases)
        anchor = chat or _participant(source, whatsapp_aliases)
        if anchor:
            parts.append(anchor)
        if source.thread_id:
            parts.append(source.thread_id)
        return RoutingKey(tuple(parts), shared=False)

    # A channel message that will be auto-threaded is keyed as the thread it opens, so the later
    # in-thread follow-ups land in the same session. A real thread id wins.
    thread = source.thread_id or source.prospective_thread_id
    parts.append(ChatType.THREAD.value if thread and not source.thread_id else source.chat_type)
    parts.extend(scopes)
    if source.chat_id:
        parts.append(source.chat_id)
    if thread:
        parts.append(thread)
    isolate = group_sessions_per_user and (not thread or thread_sessions_per_user)
    participant = _participant(source, whatsapp_aliases) if isolate else None
    if participant:
        parts.append(participant)
        return RoutingKey(tuple(parts), shared=False)
    return RoutingKey(tuple(parts), shared=True)


def _participant(source: SessionSource, whatsapp_aliases: WhatsAppAliases) -> str | None:
    participant = source.user_id_alt or source.user_id
    if participant and source.platform == Platform.WHATSAPP:
        # Fall back to the raw id when it has no canonical form (e.g. a bare "@lid").
        return canonical_whatsapp_identifier(participant, whatsapp_aliases) or participant
    return participant


# --- WhatsApp identifiers --------------------------------------------------------------------

# Only ids of this shape name a bridge mapping file (they become part of a file name).
_SAFE_IDENTIFIER = re.compile(r"[A-Za-z0-9@.+\-]+")
_PHONE_SEPARATORS = str.maketrans("", "", " \t\u00a0-.()")
_E164_MAX_DIGITS = 15
_MAX_ALIASES = 64
_MAX_MAPPING_FILE_BYTES = 4096
_MAX_CACHED_IDENTIFIERS = 10_000
# A directory changed this recently may change again within the same mtime tick, so its cache
# is not trusted yet (the "racy git" problem).
_RACY_WINDOW_NS = 2_000_000_000


def canonical_whatsapp_identifier(value: str, aliases: WhatsAppAliases = None) -> str:
    """The one id a WhatsApp user is keyed by, whichever JID, LID or phone spelling arrives.

    Bare digits for phone numbers (no "+"); with aliases, the shortest (then lexicographically
    first) of all ids the bridge maps to each other. Never raises.
    """
    identifier = _normalise_whatsapp(value)
    if not identifier or aliases is None:
        return identifier
    if isinstance(aliases, Mapping):
        return _canonical_among_aliases(identifier, lambda ident: _mapping_aliases(aliases, ident))
    return _directory_cache(aliases).canonical(identifier)


def _normalise_whatsapp(value: str) -> str:
    if not isinstance(value, str):
        return "" if value is None else _normalise_whatsapp(str(value))
    text = value.strip()
    basic = _strip_jid(text)
    if not basic or (basic.isascii() and basic.isdigit()):
        return basic
    # Phone numbers written for humans: "+1 (555) 123-4567", full-width digits, ...
    phone = _strip_jid(unicodedata.normalize("NFKC", text).strip()).translate(_PHONE_SEPARATORS)
    if phone.isascii() and phone.isdigit() and len(phone) <= _E164_MAX_DIGITS:
        return phone
    return basic


def _strip_jid(text: str) -> str:
    # First "+" dropped, then the device suffix (":47") and the server ("@s.whatsapp.net") cut off.
    return text.replace("+", "", 1).partition(":")[0].partition("@")[0]


def _canonical_among_aliases(identifier: str, aliases_of: Callable[[str], Iterable[str]]) -> str:
    seen = {identifier}
    pending = [identifier]
    while pending and len(seen) < _MAX_ALIASES:
        current = pending.pop()
        if not _SAFE_IDENTIFIER.fullmatch(current):
            continue
        for raw in aliases_of(current):
            alias = _normalise_whatsapp(raw)
            if alias and alias not in seen and _SAFE_IDENTIFIER.fullmatch(alias):
                seen.add(alias)
                pending.append(alias)
    return min(seen, key=lambda ident: (len(ident), ident))


def _mapping_aliases(mapping: Mapping[str, Iterable[str]], identifier: str) -> Iterable[str]:
    found = mapping.get(identifier) or ()
    if isinstance(found, str):
        return (found,)
    return [alias for alias in found if isinstance(alias, str)]


@dataclass
class _AliasDirectoryCache:
    """Alias lookups of one bridge session directory, valid while its mtime is unchanged."""

    directory: Path
    mtime_ns: int | None
    trusted: bool
    files: dict[str, tuple[str, ...]] = field(default_factory=dict)
    results: dict[str, str] = field(default_factory=dict)

    def canonical(self, identifier: str) -> str:
        if not self.trusted:
            return _canonical_among_aliases(identifier, self._read_aliases)
        result = self.results.get(identifier)
        if result is None:
            if len(self.results) >= _MAX_CACHED_IDENTIFIERS:
                self.results.clear()
                self.files.clear()
            result = _canonical_among_aliases(identifier, self._cached_aliases)
            self.results[identifier] = result
        return result

    def _cached_aliases(self, identifier: str) -> tuple[str, ...]:
        found = self.files.get(identifier)
        if found is None:
            found = self.files[identifier] = self._read_aliases(identifier)
        return found

    def _read_aliases(self, identifier: str) -> tuple[str, ...]:
        names = (f"lid-mapping-{identifier}.json", f"lid-mapping-{identifier}_reverse.json")
        return tuple(alias for name in names if (alias := _read_mapping_file(self.directory / name)))


_directory_caches: dict[str, _AliasDirectoryCache] = {}


def _directory_cache(directory: str | os.PathLike[str]) -> _AliasDirectoryCache:
    path = os.fspath(directory)
    try:
        mtime_ns: int | None = os.stat(path).st_mtime_ns
    except (OSError, ValueError):
        mtime_ns = None
    cache = _directory_caches.get(path)
    if cache is None or cache.mtime_ns != mtime_ns or not cache.trusted:
        trusted = mtime_ns is None or time.time_ns() - mtime_ns > _RACY_WINDOW_NS
        cache = _AliasDirectoryCache(Path(path), mtime_ns, trusted)
        _directory_caches[path] = cache
    return cache


def _read_mapping_file(path: Path) -> str | None:
    """The one JSON string a bridge lid-mapping file holds; None if missing, unreadable or corrupt."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_MAPPING_FILE_BYTES + 1)
        if len(data) > _MAX_MAPPING_FILE_BYTES:
            return None
        value = json.loads(data)
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, str) else None
