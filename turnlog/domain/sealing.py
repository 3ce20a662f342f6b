"""What encryption at rest seals, whose key seals it, and the sealed value's stored form.

Every event field that carries a message's words, and a source's identifying fields (user id,
user name, chat name), is stored sealed under its subject's data key: a subject is one user on
one platform (`platform:user_id`); a group message is its sender's. This module is the one
registry of those fields (`SEALED`) and of how an event names its subject (`SUBJECTS`); the
storage edge (storage/sealing_mapper.py) applies it, so events in memory stay plaintext.

A path is a top-level field (`content`), a key of a dict field (`source.user_id`) or a key of
each dict in a list field (`messages[].content`). A field that cannot name its subject is
sealed under the database's own key (`UNATTRIBUTED`), which erase never destroys.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, Mapping

ERASED = "[erased]"  # what readers show for the words and ids of an erased subject
SEALED_TAG = "_sealed_"  # {"_sealed_": key id, "_v_": base64 of nonce + ciphertext}
SEALED_VALUE = "_v_"
UNATTRIBUTED = "turnlog:unattributed"
SNAPSHOTS = "turnlog:snapshots"  # aggregate snapshots: a cache of the log, dropped by every erase
SCHEME = "aes-256-gcm/v1"

_SOURCE_IDS = ("user_id", "user_name", "chat_name", "user_id_alt")


def _source(field: str) -> tuple[str, ...]:
    return tuple(f"{field}.{name}" for name in _SOURCE_IDS)


_MESSAGE = ("content", "tool_calls")

# topic -> the paths sealed in its events
SEALED: dict[str, tuple[str, ...]] = {
    "turnlog:MessageAppended": _MESSAGE,
    "turnlog:MessagesImported": tuple(f"messages[].{name}" for name in _MESSAGE),
    "turnlog:InboundAccepted": ("text", "content_key", *_source("source")),  # the key hashes the words
    "turnlog:InboundRejected": ("text",),
    "turnlog:InboundReplyAttached": ("reply",),
    "turnlog:DeliveryRecorded": ("content",),
    "turnlog:DeliveryFailed": ("error",),
    "turnlog:DeliveryOutcomeUnknown": ("error",),
    "turnlog:SessionCreated": _source("origin"),
    "turnlog:SessionTitled": ("title", "previous_title"),
    "turnlog:TitleClaimed": ("title",),
    "turnlog:TurnRetried": ("text",),
    "turnlog:TranscriptCompacted": ("summary", "focus"),
    "turnlog:RouteRegistered": _source("origin"),
    "turnlog:RouteOriginChanged": _source("origin"),
    "turnlog:DelegationStarted": ("description", *_source("source")),
    "turnlog:DelegationFinished": ("summary",),
}

# topic -> where its subject is found, first that answers wins: "source:<field>" (a source
# dict), "ref:<kind>:<field>" (a subject an earlier event bound to that id), "stream" (the
# subject bound to the event's own stream)
SUBJECTS: dict[str, tuple[str, ...]] = {
    "turnlog:MessageAppended": ("ref:turn:turn_id", "ref:session:session_id"),
    "turnlog:MessagesImported": ("ref:session:session_id",),
    "turnlog:InboundAccepted": ("source:source", "stream"),
    "turnlog:InboundRejected": ("stream",),
    "turnlog:InboundReplyAttached": ("ref:item:item_id", "stream"),
    "turnlog:InboundStarted": ("ref:item:item_id",),
    "turnlog:DeliveryRecorded": ("ref:turn:turn_id", "ref:session:session_id"),
    "turnlog:DeliveryFailed": ("stream",),
    "turnlog:DeliveryOutcomeUnknown": ("stream",),
    "turnlog:SessionCreated": ("source:origin",),
    "turnlog:SessionTitled": ("stream",),
    "turnlog:TitleClaimed": ("ref:session:session_id",),
    "turnlog:TurnRetried": ("stream",),
    "turnlog:TranscriptCompacted": ("stream",),
    "turnlog:RouteRegistered": ("source:origin",),
    "turnlog:RouteOriginChanged": ("source:origin", "stream"),
    "turnlog:DelegationStarted": ("source:source", "ref:session:session_id"),
    "turnlog:DelegationFinished": ("stream",),
}

# topic -> the ids its subject is bound to, for later events to find ("stream": its own stream)
BINDS: dict[str, tuple[str, ...]] = {
    "turnlog:SessionCreated": ("session:session_id", "stream"),
    "turnlog:InboundAccepted": ("item:item_id", "stream", "turn:turn_id"),  # turn_id: accepted and started
    "turnlog:InboundStarted": ("turn:turn_id",),
    "turnlog:DeliveryRecorded": ("stream",),
    "turnlog:RouteRegistered": ("stream",),
    "turnlog:DelegationStarted": ("stream",),
}


def subject_of(source: Mapping[str, Any] | None) -> str | None:
    """`platform:user_id` of a source (its stable alternate id when it has one), None without a sender."""
    if not source:
        return None
    platform = source.get("platform")
    user = source.get("user_id_alt") or source.get("user_id")
    if not platform or not user or user == ERASED:
        return None
    return f"{platform}:{user}"


def parse_subject(text: str) -> str:
    """A subject as an operator types it (`PLATFORM:USER_ID`); ValueError when it is not one."""
    platform, sep, user = text.strip().partition(":")
    if not sep or not platform or not user:
        raise ValueError(f"a subject is PLATFORM:USER_ID, not {text!r}")
    return f"{platform}:{user}"


def fingerprint(master_key: bytes) -> str:
    """Which master key a database needs, safe to print: never the key."""
    return hashlib.sha256(b"turnlog-master-key:" + master_key).hexdigest()[:16]


def subject_hash(hash_key: bytes, subject: str) -> str:
    """The subject as the key table and SubjectErased name it: keyed, so the id cannot be guessed
    back from a stolen database without its master key."""
    return hmac.new(hash_key, subject.encode(), hashlib.sha256).hexdigest()[:32]


def is_sealed(value: Any) -> bool:
    return type(value) is dict and len(value) == 2 and SEALED_TAG in value and SEALED_VALUE in value


def sealed(key_id: str, blob: str) -> dict[str, str]:
    return {SEALED_TAG: key_id, SEALED_VALUE: blob}


def stand_in(kind: str) -> Any:
    """What an erased value reads as, by its kind letter ("s" text, "l" list, "d" dict)."""
    return ERASED if kind == "s" else [] if kind == "l" else {} if kind == "d" else None


def kind_of(value: Any) -> str:
    return "s" if isinstance(value, str) else "l" if isinstance(value, (list, tuple)) else \
        "d" if isinstance(value, dict) else "o"
