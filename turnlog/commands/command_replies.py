"""A slash command's own answer, owed through the delivery ledger like a turn's reply
(docs/behaviour.md §6.2): recorded, then attempted and settled (delivered, failed, unknown), and
swept after a crash. It stands at seq COMMAND_REPLY_SEQ, outside the transcript, so delivering it
answers no turn.

Recording it is the gateway's choice (`Turnlog.turns.record_command_reply`): a caller that sends
`CommandResult.reply` itself must not also leave it owed, or the sweep would send it again."""

from __future__ import annotations

import uuid

from ..domain.delivery import COMMAND_REPLY_SEQ, command_reply_id
from ..domain.route import Route
from ..domain.source import SessionSource
from .command_result import CommandResult
from .context import CommandContext
from .delivery import DeliveryCommands
from .routing import RoutingCommands, actor_of


class CommandReplies:
    def __init__(self, ctx: CommandContext, routing: RoutingCommands, deliveries: DeliveryCommands) -> None:
        self.ctx = ctx
        self.routing = routing
        self.deliveries = deliveries

    def record(self, source: SessionSource, result: CommandResult) -> uuid.UUID | None:
        """The delivery owing `result`'s answer to the chat of `source`; None when the command
        answered nothing or was a redelivery: its message_id names a delivery recorded already
        (a repeated /queue without text is answered again by the engine, but owed once)."""
        if not result.reply or result.duplicate:
            return None
        rk = self.routing.routing_key(source)
        ident = (command_reply_id(rk.route_id, source.message_id) if source.message_id
                 else uuid.uuid4())  # without a message id nothing can repeat it
        if self.ctx.get(ident, fresh=True) is not None:
            return None
        route: Route | None = self.ctx.get(rk.route_id)
        # The session the answer concerns, else the key's current one ("" before the key has any).
        session_id = result.session_id or (route.session_id if route is not None else None) or ""
        cause = f"command:{result.command}" + (f":{source.message_id}" if source.message_id else "")
        self.ctx.save(self.deliveries.obligation(
            session_id=session_id, seq=COMMAND_REPLY_SEQ, session_key=rk.key, reply_to=source.to_dict(),
            content=result.reply, turn_id=None, inbound_message_id=source.message_id, actor=actor_of(source),
            cause=cause, ident=ident))
        return ident
