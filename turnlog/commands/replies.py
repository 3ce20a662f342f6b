"""Writing a rich reply (domain/reply.py) under the turn's lease, message by message.

Each message is saved as it arrives — a generator responder is advanced only after the previous
message is in the log — so a turn killed in the middle of a tool loop keeps every tool call and
result it made, and a resumed turn sees them. Tool calls and tool results are fenced transcript
writes; an assistant message for the user is held until the next message shows it was not the
last, then saved with its delivery obligation and sent (its own ledger row); the last one is the
turn's answer and finishes the turn as a plain reply does (inbound.py `_reply_and_deliver`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from ..domain.inbox import InboxItem
from ..domain.reply import ReplyMessage, messages_of, usage_event
from ..errors import InvalidRequest
from .delivery import Sender
from .lease import LeaseToken

if TYPE_CHECKING:
    from .inbound import InboundCommands


def write_rich(inbound: "InboundCommands", token: LeaseToken, session_key: str, inbox_uuid: UUID | None,
               item: InboxItem, reply: Any, sender: Sender, cause: str) -> tuple[str | None, int]:
    """Returns the delivery state of the answer and its sequence number."""
    held: ReplyMessage | None = None
    try:
        for message in messages_of(reply):
            if held is not None:
                inbound._reply_and_deliver(token, session_key, inbox_uuid, item, held.content, sender, cause,
                                           **_extra(inbound, token, held, cause), finish_turn=False)
                held = None
            if message.for_user:
                held = message
            else:
                _append(inbound, token, message, cause)
    except ValueError as bad:
        raise InvalidRequest(f"bad reply from the responder: {bad}") from None
    if held is None:
        raise InvalidRequest("the responder's reply did not end with an assistant message for the user")
    extra = _extra(inbound, token, held, cause)
    seq = inbound.turns.next_seq(token)
    state = inbound._reply_and_deliver(token, session_key, inbox_uuid, item, held.content, sender, cause, **extra)
    return state, seq


def _fields(message: ReplyMessage) -> dict[str, Any]:
    tokens = message.usage.output_tokens if message.usage is not None else None
    return {"tool_calls": message.tool_calls, "tool_call_id": message.tool_call_id, "name": message.name,
            "finish_reason": message.finish_reason, "token_count": tokens}


def _extra(inbound: "InboundCommands", token: LeaseToken, message: ReplyMessage, cause: str) -> dict[str, Any]:
    seq = inbound.turns.next_seq(token)
    usage = usage_event(message, session_id=token.session_id, seq=seq, epoch=token.epoch, turn_id=token.turn_id,
                        at=inbound.ctx.clock.now(), actor=inbound.turns.owner, cause=cause)
    return {"fields": _fields(message), "also": [usage] if usage is not None else []}


def _append(inbound: "InboundCommands", token: LeaseToken, message: ReplyMessage, cause: str) -> None:
    turns = inbound.turns
    seq = turns.next_seq(token)
    event = turns.message_event(token, seq, message.role, message.content, cause=cause, **_fields(message))
    extra = _extra(inbound, token, message, cause)["also"]
    turns.fenced_save(token, event, *extra, last_seq=seq, cause=cause)
