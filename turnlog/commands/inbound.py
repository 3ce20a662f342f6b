"""Inbound messages: accept durably, then run queued items as turns, one at a time per key.

A turn is: route the item (the policy decides here), take the session's lease while starting
the item and appending the user message in the same transaction, ask the responder for a
reply, save the reply with its delivery obligation, deliver it, and finally settle the
delivery, complete the item and release the lease in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..domain.inbox import HUMAN, WAKEUP, Inbox, InboxFull, InboxItem, inbox_id
from ..domain.keys import RoutingKey
from ..domain.silence import outbound_for_reply
from ..domain.source import SessionSource
from ..domain.transcript import MessageAppended
from ..errors import InvalidRequest, TurnlogError
from .context import CommandContext
from .delivery import DeliveryCommands, Sender
from .routing import RoutingCommands, actor_of, origin_of
from .turns import LeaseToken, TurnCommands

# The agent: given the session's transcript so far (ending with this turn's user message) and the
# inbound item, returns the reply text.
Responder = Callable[[list[MessageAppended], InboxItem], str]


class QueueFull(TurnlogError):
    """The key already has the maximum number of items waiting."""


class _NothingPending(Exception):
    """Another worker took the last pending item while this one waited for the lease."""


@dataclass(frozen=True)
class Accepted:
    route_id: str
    session_key: str
    item_id: str
    merged: bool
    depth: int
    position: int


@dataclass(frozen=True)
class TurnOutcome:
    session_key: str
    session_id: str
    item_id: str
    epoch: int
    turn_id: str
    user_seq: int
    reply_seq: int
    delivery_state: str | None  # None when nothing was owed (silence on an internal turn)
    created_session: bool
    reason: str | None


class InboundCommands:
    def __init__(self, ctx: CommandContext, routing: RoutingCommands, turns: TurnCommands,
                 deliveries: DeliveryCommands) -> None:
        self.ctx = ctx
        self.routing = routing
        self.turns = turns
        self.deliveries = deliveries

    def inbox(self, rk: RoutingKey) -> Inbox | None:
        return self.ctx.get(inbox_id(rk.route_id))

    def _inbox_or_new(self, rk: RoutingKey, actor: str, cause: str) -> Inbox:
        inbox = self.inbox(rk)
        if inbox is None:
            inbox = Inbox.new(Inbox.Created, id=inbox_id(rk.route_id), at=self.ctx.clock.now(), actor=actor,
                                cause=cause, route_id=str(rk.route_id), session_key=rk.key)
        return inbox

    def accept(self, source: SessionSource, text: str, *, kind: str = HUMAN, actor: str | None = None,
               cause: str | None = None) -> Accepted:
        """Record an inbound message before anything else is done with it."""
        if not isinstance(text, str):
            raise InvalidRequest("inbound text must be a string")
        rk = self.routing.routing_key(source)
        actor = actor or (actor_of(source) if kind != WAKEUP else "system:wakeup")
        cause = cause or (f"message:{source.message_id}" if source.message_id else f"inbound:{kind}")
        source_dict = {**origin_of(source), "message_id": source.message_id}

        def step() -> Accepted:
            inbox = self._inbox_or_new(rk, actor, cause)
            try:
                item_id = inbox.accept(kind, text, message_id=source.message_id, source=source_dict,
                                       at=self.ctx.clock.now(), actor=actor, cause=cause)
            except InboxFull as full:
                self.ctx.save(inbox)  # the rejection is part of the record
                raise QueueFull(str(full)) from None
            merged = item_id != str(inbox.accepted)
            position = self.ctx.save(inbox)
            return Accepted(str(rk.route_id), rk.key, item_id, merged, inbox.depth, position)
        return self.ctx.retrying(step, f"accepting a message for {rk.key}")

    def run_next(self, source: SessionSource, responder: Responder, sender: Sender, *,
                 generation: int = 0, timeout: float | None = None) -> TurnOutcome | None:
        """Run the oldest pending item of the source's key as one turn; None when nothing waits."""
        rk = self.routing.routing_key(source)
        inbox = self.inbox(rk)
        pending = inbox.pending() if inbox is not None else []
        if not pending:
            return None
        item = pending[0]
        item_source = SessionSource.from_dict(item.source) if item.source else source
        cause = f"inbound:{item.item_id}"
        actor = actor_of(item_source) if item.kind != WAKEUP else "system:wakeup"
        routed = self.routing.get_or_create_session(item_source, actor=actor, cause=cause)
        session_id = routed.session_id
        first_seq: list[int] = []
        taken: list[InboxItem] = []

        def start_turn(lease: Any, token: LeaseToken) -> Iterable[Any]:
            fresh = self.inbox(rk)
            waiting = fresh.pending() if fresh is not None else []
            if not waiting:
                raise _NothingPending
            item = waiting[0]
            taken[:] = [item]
            fresh.start(item.item_id, session_id=session_id, turn_id=token.turn_id, at=self.ctx.clock.now(),
                        actor=actor, cause=cause)
            seq = lease.last_seq + 1
            message = self.turns.message_event(token, seq, "user", item.text, actor=actor, cause=cause,
                                               platform_message_id=item.message_ids[-1])
            lease.renew(epoch=token.epoch, ttl_s=self.ctx.config.lease_ttl_s, last_seq=seq,
                        at=self.ctx.clock.now(), actor=actor, cause=cause)
            first_seq[:] = [seq]
            return [fresh, message]

        try:
            token = self.turns.acquire(session_id, rk.key, generation=generation, timeout=timeout, actor=actor,
                                       cause=cause, before_save=start_turn)
        except _NothingPending:
            return None
        item = taken[0]
        cause = f"inbound:{item.item_id}"
        history = self.turns.transcript(session_id)
        reply = responder(history, item)
        reply_seq = self.turns.next_seq(token)
        reply_event = self.turns.message_event(token, reply_seq, "assistant", reply, cause=cause)
        outbound = outbound_for_reply(reply, internal=item.kind == WAKEUP)
        obligation = None
        if outbound is not None:
            obligation = self.deliveries.obligation(
                session_id=session_id, seq=reply_seq, session_key=rk.key, reply_to=item.source, content=outbound,
                turn_id=token.turn_id, inbound_message_id=item.message_ids[-1], actor=self.turns.owner, cause=cause)
        self.turns.fenced_save(token, reply_event, *([obligation] if obligation else []), last_seq=reply_seq,
                               cause=cause)

        def finish() -> list[Any]:
            fresh = self.inbox(rk)
            lease = self.turns.release_event(token, "completed", cause=cause)
            items: list[Any] = [lease] if lease is not None else []
            if fresh is not None:
                fresh.complete(item.item_id, "answered", at=self.ctx.clock.now(), actor=self.turns.owner, cause=cause)
                items.append(fresh)
            return items

        state = None
        if obligation is not None:
            state = self.deliveries.deliver(obligation.id, sender, also=finish).state
        else:
            self.ctx.save(*finish())
        self.turns._forget(token)
        return TurnOutcome(rk.key, session_id, item.item_id, token.epoch, token.turn_id, first_seq[0], reply_seq,
                           state, routed.created, routed.reason)

    def handle_message(self, source: SessionSource, text: str, responder: Responder, sender: Sender, *,
                       kind: str = HUMAN, timeout: float | None = None) -> list[TurnOutcome]:
        """Accept a message and run turns until the key's queue is empty (what a gateway loop does)."""
        self.accept(source, text, kind=kind)
        outcomes = []
        while (outcome := self.run_next(source, responder, sender, timeout=timeout)) is not None:
            outcomes.append(outcome)
        return outcomes
