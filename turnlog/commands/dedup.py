"""Durable inbound dedup at the accept step (domain/dedup.py has the rules).

`check` runs inside the transaction that accepts a message: it raises DuplicateInbound for a repeat
and otherwise returns the MessageSeen stream to save with the accept, so the first sighting and
the acceptance commit together. `refuse` records the refusal on the key's Inbox: who sent it and why.
"""

from __future__ import annotations

from typing import Any

from ..domain.dedup import BY_MESSAGE_ID, DuplicateInbound, MessageSeen, judges_text, message_seen_id, window_for
from ..domain.inbox import Inbox
from ..domain.keys import RoutingKey
from .context import CommandContext


class InboundDedup:
    def __init__(self, ctx: CommandContext) -> None:
        self.ctx = ctx

    def check(self, rk: RoutingKey, inbox: Inbox | None, kind: str, text: str, source: dict[str, Any], *,
              look_up_id: bool = True) -> None:
        """Raise DuplicateInbound when the message repeats one accepted on this key (without an
        inbox, as for a slash command, only its message id is judged).

        `look_up_id=False` skips reading the message id's stream: a first try may rely on the save,
        which fails on a seen id like any conflict, and the retry looks it up (one read less a message).
        """
        message_id = source.get("message_id")
        if message_id and look_up_id:
            # fresh=False: a MessageSeen never changes once created, and a missing one is read from the log.
            seen: MessageSeen | None = self.ctx.get(message_seen_id(rk.route_id, message_id, kind), fresh=False)
            if seen is not None:
                raise DuplicateInbound(BY_MESSAGE_ID, message_id, seen.item_id, seen.created_on)
        if inbox is not None and judges_text(source.get("platform"), self.ctx.config.dedup_text_platforms):
            inbox.check_repeat(kind, text, source=source, at=self.ctx.clock.now(),
                               window_s=window_for(source.get("platform"), self.ctx.config.dedup_window_s))

    def first_sighting(self, rk: RoutingKey, kind: str, source: dict[str, Any], item_id: str, actor: str,
                       cause: str) -> list[Any]:
        """What records the message id as seen, to save with the accept (nothing without an id)."""
        message_id = source.get("message_id")
        if not message_id:
            return []
        return [MessageSeen.new(MessageSeen.Created, id=message_seen_id(rk.route_id, message_id, kind),
                                at=self.ctx.clock.now(), actor=actor, cause=cause, route_id=str(rk.route_id),
                                message_id=message_id, item_id=item_id)]

    def refuse(self, inbox: Inbox, kind: str, duplicate: DuplicateInbound, actor: str, cause: str) -> Inbox:
        inbox.refuse_duplicate(kind, duplicate, at=self.ctx.clock.now(), actor=actor, cause=cause)
        return inbox
