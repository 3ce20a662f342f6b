"""Inbound dedup rules (docs/behaviour.md §14, made durable): which accepted message a new one repeats.

Hermes keeps its dedup cache in memory (TTL 300 s from first sighting, lost on restart). turnlog
keeps both of its keys in the log, so a restart or a second process forgets nothing:
- a platform `message_id` is seen once per routing key, ever: each first sighting creates a tiny
  `MessageSeen` stream with a deterministic id, in the transaction that accepts the message, so two
  processes racing on one id end in an optimistic-concurrency conflict and the loser finds it seen;
- the same text from the same sender on one key is a repeat within a window (default 300 s) from its
  first sighting; the Inbox keeps a bounded map of (sender, text hash) -> first sighting for that.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Mapping
from uuid import UUID

from ..errors import InvalidRequest
from .base import TurnlogAggregate, stream_id

DEFAULT_DEDUP_WINDOW_S = 300.0
DEFAULT_DEDUP_TEXT_PLATFORMS = frozenset({"weixin"})  # where Hermes judges repeated text (its Weixin adapter)
# What an Inbox remembers of the texts it accepted, to keep its state and snapshots small: at most
# CONTENT_SEEN_CAP sightings (a key's own burst, not a platform's whole traffic as Hermes' 2000-key
# cache), none older than CONTENT_SEEN_KEEP_S (so a window longer than that is cut to it), each a
# 16-hex hash and a POSIX time.
CONTENT_SEEN_CAP = 32
CONTENT_SEEN_KEEP_S = 8 * 3600.0  # the longest retry window a platform keeps (Feishu retries for ~7 h)
BY_MESSAGE_ID = "message_id"
BY_SAME_TEXT = "same_text"


COMMAND = "command"  # the kind a slash command is judged as
_COMMAND_KINDS = (COMMAND, "queued")  # /queue TEXT is a command too


def message_seen_id(route_id: UUID | str, message_id: str, kind: str) -> UUID:
    """Commands have ids of their own namespace: a message and a command never repeat each other."""
    seen = f"{COMMAND}:{message_id}" if kind in _COMMAND_KINDS else message_id
    return stream_id("inbound-message", f"{route_id}:{seen}")


def sender_of(source: Mapping[str, Any] | None) -> str | None:
    """The sender a text repeat is judged by: the stable alternate id first, as in routing."""
    if not source:
        return None
    who = source.get("user_id_alt") or source.get("user_id")
    return str(who) if who else None


def content_key(sender: str, text: str) -> str:
    body = f"{len(sender)}:{sender}:{text}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(body).hexdigest()[:16]


def judges_text(platform: str | None, platforms: frozenset[str] | set[str]) -> bool:
    return "*" in platforms or (platform is not None and platform in platforms)


def window_for(platform: str | None, windows: float | Mapping[str, float]) -> float:
    """The text-dedup window of a platform: one number for all, or by platform ("*": the others)."""
    if isinstance(windows, (int, float)):
        return float(windows)
    return float(windows.get(platform or "", windows.get("*", DEFAULT_DEDUP_WINDOW_S)))


def check_windows(windows: Any) -> None:
    values = [windows] if isinstance(windows, (int, float)) else list(dict(windows).values()) \
        if isinstance(windows, Mapping) else [windows]
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= CONTENT_SEEN_KEEP_S:
            raise InvalidRequest(f"dedup_window_s must be seconds from 0 to {CONTENT_SEEN_KEEP_S:.0f} "
                             f"(one number or one per platform), got {windows!r}")


def repeats_within(first_seen: float | None, now: datetime, window_s: float) -> bool:
    """A repeat inside the window is a duplicate; the window runs from the first sighting only."""
    window_s = min(window_s, CONTENT_SEEN_KEEP_S)
    return first_seen is not None and window_s > 0 and now.timestamp() < first_seen + window_s


def remember(seen: Mapping[str, float], key: str, at: datetime) -> dict[str, float]:
    """`seen` with `key` first sighted at `at`, without sightings too old or beyond the cap."""
    now = at.timestamp()
    out = {k: v for k, v in seen.items() if k != key and v > now - CONTENT_SEEN_KEEP_S}
    out[key] = now
    while len(out) > CONTENT_SEEN_CAP:
        out.pop(next(iter(out)))
    return out


def seen_time(first_seen: float | None) -> datetime | None:
    return datetime.fromtimestamp(first_seen, timezone.utc) if first_seen is not None else None


class DuplicateInbound(Exception):
    """The message repeats one already accepted for this key; nothing of it was recorded yet."""

    def __init__(self, reason: str, message_id: str | None, duplicate_of: str | None,
                 first_seen_at: datetime | None) -> None:
        super().__init__(f"duplicate inbound message ({reason})")
        self.reason = reason
        self.message_id = message_id
        self.duplicate_of = duplicate_of
        self.first_seen_at = first_seen_at


class MessageSeen(TurnlogAggregate):
    """One platform message id first accepted on one routing key (a single event, never changed)."""

    TOPIC = "turnlog:InboundMessageSeen"

    if TYPE_CHECKING:  # state set by the events' apply methods
        route_id: str
        message_id: str
        item_id: str

    class Created(TurnlogAggregate.Created):
        TOPIC = "turnlog:InboundMessageFirstSeen"
        route_id: str
        message_id: str
        item_id: str

        def apply(self, seen: "MessageSeen") -> None:
            seen.route_id = self.route_id
            seen.message_id = self.message_id
            seen.item_id = self.item_id

    @property
    def settled(self) -> bool:
        return True
