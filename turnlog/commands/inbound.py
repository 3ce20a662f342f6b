"""Inbound messages, accepted durably before anything else is done with them.

A message is accepted into its key's inbox (the queue: it merges into a waiting item when it can),
or refused as a repeat and never run (dedup.py); either is recorded. Running what waits is the
runner's (runner.py): each pending item becomes one turn (turn.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..domain.dedup import COMMAND, DuplicateInbound
from ..domain.inbox import HUMAN, WAKEUP, Inbox, InboxFull, inbox_id
from ..domain.keys import RoutingKey
from ..domain.source import SessionSource
from ..errors import InvalidRequest, QueueFull
from .context import CommandContext
from .dedup import InboundDedup
from .routing import RoutingCommands, actor_of, origin_of




@dataclass(frozen=True)
class Accepted:
    route_id: str
    session_key: str
    item_id: str
    merged: bool
    depth: int
    position: int
    # Why the message was refused as a repeat (message_id | same_text), None when it was accepted;
    # item_id is then the item its first sighting went into, when known.
    duplicate: str | None = None


class InboundCommands:
    def __init__(self, ctx: CommandContext, routing: RoutingCommands) -> None:
        self.ctx = ctx
        self.routing = routing
        self.dedup = InboundDedup(ctx)

    def inbox(self, rk: RoutingKey, fresh: bool = True) -> Inbox | None:
        return self.ctx.get(inbox_id(rk.route_id), fresh)

    def _inbox_or_new(self, rk: RoutingKey, actor: str, cause: str) -> Inbox:
        inbox = self.inbox(rk, fresh=False)
        if inbox is None:
            inbox = Inbox.new(Inbox.Created, id=inbox_id(rk.route_id), at=self.ctx.clock.now(), actor=actor,
                                cause=cause, route_id=str(rk.route_id), session_key=rk.key)
        return inbox

    def accepting(self, rk: RoutingKey, source: SessionSource, text: str, kind: str, actor: str,
                  cause: str, reply: str | None = None, *, first_try: bool = False,
                  pinned: tuple[str, str] | None = None,
                  judged: tuple[Inbox, dict[str, Any]] | None = None) -> tuple[Inbox, str, list[Any]]:
        """The inbox with the message accepted (pending event), the item it went into, and the
        first sighting of its message id: all to be saved together. Raises DuplicateInbound
        (on a first try, a seen message id shows as a conflict of the save instead).
        `pinned`: a wake-up for one session (Inbox.accept). `judged`: what `judged` returned for
        this message in this try, when the caller has it."""
        if reply is not None and not isinstance(reply, str):
            raise InvalidRequest("a recorded reply must be a string")
        inbox, source_dict = judged or self.judged(rk, source, text, kind, actor, cause, first_try=first_try)
        try:
            item_id = inbox.accept(kind, text, message_id=source.message_id, source=source_dict,
                                   at=self.ctx.clock.now(), actor=actor, cause=cause, reply=reply, pinned=pinned)
        except InboxFull as full:
            self.ctx.save(inbox)  # the refusal is part of the record
            raise QueueFull(str(full)) from None
        return inbox, item_id, self.dedup.first_sighting(rk, kind, source_dict, item_id, actor, cause)

    def judged(self, rk: RoutingKey, source: SessionSource, text: str, kind: str, actor: str, cause: str, *,
               first_try: bool = False) -> tuple[Inbox, dict[str, Any]]:
        """The key's inbox and the message's source as the inbox records it, once the message is
        judged no repeat (DuplicateInbound otherwise: see accepting); nothing is recorded yet."""
        if not isinstance(text, str):
            raise InvalidRequest("inbound text must be a string")
        inbox = self._inbox_or_new(rk, actor, cause)
        source_dict = {**origin_of(source), "message_id": source.message_id}
        self.dedup.check(rk, inbox, kind, text, source_dict, look_up_id=not first_try)
        return inbox, source_dict

    def refuse(self, rk: RoutingKey, kind: str, duplicate: DuplicateInbound, actor: str,
               cause: str) -> Accepted:
        """Record a repeat as refused (never run) on the key's inbox."""
        def step() -> Accepted:
            inbox = self.dedup.refuse(self._inbox_or_new(rk, actor, cause), kind, duplicate, actor, cause)
            position = self.ctx.save(inbox)
            return Accepted(str(rk.route_id), rk.key, duplicate.duplicate_of or "", False, inbox.depth, position,
                            duplicate.reason)
        return self.ctx.retrying(step, f"refusing a duplicate message for {rk.key}")

    def who(self, source: SessionSource | dict[str, Any], kind: str) -> tuple[str, str]:
        actor = actor_of(source) if kind != WAKEUP else "system:wakeup"
        message_id = source.get("message_id") if isinstance(source, dict) else source.message_id
        cause = f"message:{message_id}" if message_id else f"inbound:{kind}"
        return actor, cause

    def accept(self, source: SessionSource, text: str, *, kind: str = HUMAN, actor: str | None = None,
               cause: str | None = None, reply: str | None = None) -> Accepted:
        """Record an inbound message before anything else is done with it (a repeat is refused).

        `reply`: a reply already given to it (replayed traffic), recorded by whichever turn runs it.
        """
        rk = self.routing.routing_key(source)
        default_actor, default_cause = self.who(source, kind)
        actor, cause = actor or default_actor, cause or default_cause

        tries = Tries()

        def step() -> Accepted:
            inbox, item_id, seen = self.accepting(rk, source, text, kind, actor, cause, reply,
                                                   first_try=tries.first())
            position = self.ctx.save(inbox, *seen)
            return Accepted(str(rk.route_id), rk.key, item_id, item_id != str(inbox.accepted), inbox.depth,
                            position)
        try:
            return self.ctx.retrying(step, f"accepting a message for {rk.key}")
        except DuplicateInbound as duplicate:
            return self.refuse(rk, kind, duplicate, actor, cause)

    def claim_command(self, source: SessionSource, name: str, *, actor: str, cause: str) -> Accepted | None:
        """A slash command's message id, claimed before it runs: None the first time, the refusal of a
        repeat after (a redelivered /new must not reset twice). At most once: a crash between the
        claim and the command's own transaction loses that command rather than doubling it."""
        rk = self.routing.routing_key(source)
        origin = {**origin_of(source), "message_id": source.message_id}

        tries = Tries()

        def step() -> None:
            self.dedup.check(rk, None, COMMAND, name, origin, look_up_id=not tries.first())
            self.ctx.save(*self.dedup.first_sighting(rk, COMMAND, origin, name, actor, cause))
        try:
            self.ctx.retrying(step, f"claiming a command for {rk.key}")
        except DuplicateInbound as duplicate:
            return self.refuse(rk, COMMAND, duplicate, actor, cause)
        return None

class Tries:
    """Whether a retried step is on its first try (see InboundDedup.check's look_up_id)."""

    def __init__(self) -> None:
        self.count = 0

    def first(self) -> bool:
        self.count += 1
        return self.count == 1
