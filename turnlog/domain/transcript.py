"""A session's transcript: a per-session stream of MessageAppended events, never reconstructed.

The stream id is derived from the session_id and the version is the message's sequence number,
so messages are strictly ordered and a duplicate sequence number is a conflict. Loading a
session's lifecycle state never reads this stream.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.utils import register_topic

from .base import StreamEvent, stream_id

ROLES = frozenset({"user", "assistant", "tool", "system", "session_meta"})


def transcript_id(session_id: str) -> UUID:
    return stream_id("transcript", session_id)


class MessageAppended(StreamEvent):
    TOPIC = "turnlog:MessageAppended"
    session_id: str
    role: str
    content: str
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    name: str | None
    token_count: int | None
    finish_reason: str | None
    platform_message_id: str | None
    epoch: int
    turn_id: str
    actor: str
    cause: str


register_topic(MessageAppended.TOPIC, MessageAppended)


def validate_message(role: str, content: Any, tool_calls: Any, token_count: Any) -> None:
    if role not in ROLES:
        raise ValueError(f"unknown message role {role!r} (known: {', '.join(sorted(ROLES))})")
    if not isinstance(content, str):
        raise ValueError(f"message content must be a string, got {type(content).__name__}")
    if tool_calls is not None and not (isinstance(tool_calls, list) and all(isinstance(c, dict) for c in tool_calls)):
        raise ValueError("tool_calls must be a list of objects")
    if token_count is not None and (not isinstance(token_count, int) or token_count < 0):
        raise ValueError(f"token_count must be a non-negative integer, got {token_count!r}")
