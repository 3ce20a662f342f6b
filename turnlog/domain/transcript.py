"""A session's transcript: a per-session stream of MessageAppended events, never reconstructed.

The stream id is derived from the session_id and the version is the message's sequence number,
so messages are strictly ordered and a duplicate sequence number is a conflict. Loading a
session's lifecycle state never reads this stream.

An import writes a session's past messages as a few MessagesImported events instead of one
event per message: each holds a run of consecutive messages and takes the stream version of the
run's last one, so the stream's version is still its message count (time travel and `diff` count
messages by it) and a message appended after the import conflicts as before. Readers never see
the difference: `read_transcript` and `imported_messages` give the run as the MessageAppended
events it stands for, and projections file each of them with their per-message handler.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Iterable
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


class MessagesImported(StreamEvent):
    """Messages seq first_seq .. originator_version, all at once (see the module docstring).

    Each message is a dict of MessageAppended's per-message fields (MESSAGE_FIELDS), unset ones
    left out; the others (session, epoch, actor, cause) are the run's. Version 2: each message
    also carries its own time, `timestamp` (ISO text, UTC): an imported message happened when the
    other gateway says, not when the import recorded the run (the event's own timestamp)."""

    TOPIC = "turnlog:MessagesImported"
    class_version = 2
    session_id: str
    first_seq: int
    messages: list[dict[str, Any]]
    epoch: int
    actor: str
    cause: str

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        # Version 1 gave every message of a run the run's time.
        at = state["timestamp"]
        stamp = at.isoformat() if isinstance(at, datetime) else str(at)
        state["messages"] = [{**m, "timestamp": stamp} for m in state["messages"]]


register_topic(MessageAppended.TOPIC, MessageAppended)
register_topic(MessagesImported.TOPIC, MessagesImported)

MESSAGE_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "name", "token_count", "finish_reason",
                  "platform_message_id", "turn_id")


_RUN_FIELDS = ("originator_id", "timestamp", "session_id", "epoch", "actor", "cause")  # shared by a run's messages
_BLANK = {**dict.fromkeys(MESSAGE_FIELDS), "content": ""}


def imported_fields(run: dict[str, Any]) -> list[dict[str, Any]]:
    """A MessagesImported event's fields (as projections get them, or the event's own) as the
    fields of the MessageAppended events it stands for, in order: the one rule for reading a run."""
    shared = {name: run[name] for name in _RUN_FIELDS if name in run}
    fields = [{**shared, **_BLANK, **m, "originator_version": seq}
              for seq, m in enumerate(run["messages"], start=run["first_seq"])]
    if isinstance(shared.get("timestamp"), datetime):  # the event itself: its times are datetimes too
        for one in fields:
            if type(one["timestamp"]) is str:
                one["timestamp"] = datetime.fromisoformat(one["timestamp"])
    return fields


def imported_messages(run: MessagesImported) -> list[MessageAppended]:
    """A MessagesImported event as the MessageAppended events it stands for, in order."""
    return [MessageAppended(**fields) for fields in imported_fields(run.__dict__)]


def read_transcript(get: Callable[..., Iterable[Any]], session_id: str, *, after: int | None = None,
                    upto: int | None = None, newest_first: bool = False,
                    limit: int | None = None) -> list[MessageAppended]:
    """Messages after .. upto (sequence numbers) of a session, from `get` (the event store's
    get(originator_id, gt=, lte=, desc=, limit=)). A run counts at its last message's version,
    so the stream read by versions can start inside a run (it is cut) and end before a run that
    holds `upto` (which is read too); every event read holds at least one wanted message, so
    `limit` events hold enough."""
    stream = transcript_id(session_id)
    events = list(get(stream, gt=after, lte=upto, desc=newest_first, limit=limit))
    if upto is not None:
        straddling = next(iter(get(stream, gt=upto, limit=1)), None)
        if type(straddling) is MessagesImported and straddling.first_seq <= upto:
            if newest_first:
                events.insert(0, straddling)
            else:
                events.append(straddling)
    if all(type(e) is MessageAppended for e in events):
        return events
    low, high = after or 0, upto if upto is not None else 1 << 62
    messages: list[MessageAppended] = []
    for e in events:
        run = imported_messages(e) if type(e) is MessagesImported else [e]
        messages += reversed(run) if newest_first else run
    messages = [m for m in messages if low < m.originator_version <= high]
    return messages[:limit] if limit is not None else messages


def message_at(get: Callable[..., Iterable[Any]], session_id: str, seq: int) -> MessageAppended | None:
    """The session's message at `seq` (None: the log has none there), from `get` as read_transcript's."""
    return next(iter(read_transcript(get, session_id, after=seq - 1, upto=seq)), None)


def validate_message(role: str, content: Any, tool_calls: Any, token_count: Any) -> None:
    if role not in ROLES:
        raise ValueError(f"unknown message role {role!r} (known: {', '.join(sorted(ROLES))})")
    if not isinstance(content, str):
        raise ValueError(f"message content must be a string, got {type(content).__name__}")
    if tool_calls is not None and not (isinstance(tool_calls, list) and all(isinstance(c, dict) for c in tool_calls)):
        raise ValueError("tool_calls must be a list of objects")
    if token_count is not None and (not isinstance(token_count, int) or token_count < 0):
        raise ValueError(f"token_count must be a non-negative integer, got {token_count!r}")
