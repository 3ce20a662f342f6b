"""Rich replies: what a responder may return besides a plain string (docs/behaviour.md §10 message fields).

A turn's reply may be several messages, returned as a list or streamed from a generator:
assistant messages carrying `tool_calls`, tool results (`tool_call_id`, `name`), and a final
assistant message, each with an optional `finish_reason`, token `usage` and `model`. A message is
meant for the user — so it becomes a delivery obligation in the ledger — when it is an assistant
message without tool calls (or when it says `deliver=True`); tool traffic never is. A reply ends
with an assistant message for the user: the turn's answer. Plain `str` replies stay what they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Iterator, Mapping, Sequence
from uuid import UUID

from eventsourcing.utils import register_topic

from .base import StreamEvent, stream_id
from .tool_answers import is_interrupted_answer

REPLY_ROLES = ("assistant", "tool")

# Each usage figure and the names providers give it (OpenAI chat/responses, Anthropic, Hermes).
_USAGE_NAMES: dict[str, tuple[str, ...]] = {
    "input_tokens": ("input_tokens", "prompt_tokens"),
    "output_tokens": ("output_tokens", "completion_tokens"),
    "cache_read_tokens": ("cache_read_tokens", "cache_read_input_tokens", "prompt_tokens_details.cached_tokens",
                          "input_tokens_details.cached_tokens"),
    "cache_write_tokens": ("cache_write_tokens", "cache_creation_input_tokens"),
    "reasoning_tokens": ("reasoning_tokens", "completion_tokens_details.reasoning_tokens",
                         "output_tokens_details.reasoning_tokens"),
}


def _lookup(raw: Mapping[str, Any], dotted: str) -> Any:
    value: Any = raw
    for part in dotted.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


@dataclass(frozen=True)
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None

    @classmethod
    def of(cls, raw: "Usage | Mapping[str, Any] | None") -> "Usage | None":
        if raw is None or isinstance(raw, Usage):
            return raw
        if not isinstance(raw, Mapping):
            raise ValueError(f"usage must be a mapping of token counts, got {type(raw).__name__}")
        found: dict[str, int] = {}
        for field_name, names in _USAGE_NAMES.items():
            for name in names:
                value = _lookup(raw, name)
                if value is None:
                    continue
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise ValueError(f"usage {name} must be a non-negative integer, got {value!r}")
                found[field_name] = value
                break
        return cls(**found)

    def to_dict(self) -> dict[str, int]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class ReplyMessage:
    role: str = "assistant"
    content: str = ""
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None
    deliver: bool | None = None  # None: the rule of the module docstring

    @property
    def for_user(self) -> bool:
        if self.deliver is not None:
            return self.deliver and self.role == "assistant"
        return self.role == "assistant" and not self.tool_calls

    @classmethod
    def of(cls, raw: "ReplyMessage | Mapping[str, Any] | str") -> "ReplyMessage":
        """From a string, an OpenAI-style message dict, or a ReplyMessage; ValueError names what is wrong."""
        if isinstance(raw, ReplyMessage):
            message = raw
        elif isinstance(raw, str):
            message = cls(content=raw)
        elif isinstance(raw, Mapping):
            unknown = sorted(set(raw) - set(cls.__dataclass_fields__))
            if unknown:
                raise ValueError(f"reply message has unknown field {unknown[0]!r}")
            fields = dict(raw)
            if fields.get("content") is None:
                fields["content"] = ""
            fields["usage"] = Usage.of(fields.get("usage"))
            message = cls(**fields)
        else:
            raise ValueError(f"a reply message must be a str, a dict or a ReplyMessage, got {type(raw).__name__}")
        if message.role not in REPLY_ROLES:
            raise ValueError(f"a reply message's role must be assistant or tool, got {message.role!r}")
        if not isinstance(message.content, str):
            raise ValueError(f"reply content must be a string, got {type(message.content).__name__}")
        if message.role == "tool" and not message.tool_call_id:
            raise ValueError("a tool result needs the tool_call_id it answers")
        if message.model is not None and not isinstance(message.model, str):
            raise ValueError(f"model must be a string, got {message.model!r}")
        return message


def messages_of(reply: Any) -> Iterator[ReplyMessage]:
    """The messages of a reply, one at a time (a generator is advanced only as they are written)."""
    if isinstance(reply, (str, ReplyMessage, Mapping)):
        yield ReplyMessage.of(reply)
        return
    if not isinstance(reply, Iterable):
        raise ValueError(f"a reply must be a str, a message or an iterable of messages, got {type(reply).__name__}")
    for raw in reply:
        yield ReplyMessage.of(raw)


def turn_answer(turn: Sequence[Any]) -> Any | None:
    """The turn's answer, if it got that far: its last message, when that is an assistant message
    without tool calls. A turn that stopped inside its tool loop has none, so it is resumed."""
    last = turn[-1] if turn else None
    return last if last is not None and last.role == "assistant" and not last.tool_calls else None


def completed_tool_calls(turn: Sequence[Any]) -> list[str]:
    """Names (with ids) of the tool calls answered in a turn's messages: what a resume must not redo.
    A call answered only by the interruption (tool_answers.py) did not complete."""
    return [f"{m.name or 'tool'} ({m.tool_call_id})" for m in turn if m.role == "tool" and not is_interrupted_answer(m)]


def cut_off_tool_calls(turn: Sequence[Any]) -> list[str]:
    """Names (with ids) of the calls a turn was cut off in: their effects are unknown."""
    return [f"{m.name or 'tool'} ({m.tool_call_id})" for m in turn if is_interrupted_answer(m)]


def usage_id(session_id: str, seq: int) -> UUID:
    return stream_id("usage", f"{session_id}#{seq}")


class MessageUsageRecorded(StreamEvent):
    """The model and token usage of one transcript message, saved with it (its own one-event stream,
    so the message event keeps its shape)."""

    TOPIC = "turnlog:MessageUsageRecorded"
    session_id: str
    seq: int
    model: str | None
    usage: dict[str, int]
    epoch: int
    turn_id: str
    actor: str
    cause: str


register_topic(MessageUsageRecorded.TOPIC, MessageUsageRecorded)


def usage_event(message: ReplyMessage, *, session_id: str, seq: int, epoch: int, turn_id: str, at: datetime,
                actor: str, cause: str) -> MessageUsageRecorded | None:
    if message.usage is None and message.model is None:
        return None
    return MessageUsageRecorded(originator_id=usage_id(session_id, seq), originator_version=1, timestamp=at,
                                session_id=session_id, seq=seq, model=message.model,
                                usage=message.usage.to_dict() if message.usage else {}, epoch=epoch,
                                turn_id=turn_id, actor=actor, cause=cause)
