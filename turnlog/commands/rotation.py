"""Compression rotation (docs/behaviour.md §11): the conversation continues in a child session.

One transaction ends the parent (reason compression), creates the child with its lineage,
re-points the route, and moves the running turn's lease to the child: the parent's lease is
fenced off (a write under the old token is refused) and the child's lease is acquired by the
same owner for the same turn.
"""

from __future__ import annotations

from eventsourcing.persistence import IntegrityError

from ..clock import lease_time
from ..domain.compression import should_compress
from ..domain.history import history_length
from ..domain.lease import TurnLease
from ..domain.route import Route
from ..domain.session import Session
from ..domain.source import SessionSource
from ..errors import InvalidRequest, NotFound, StaleLease
from .context import CommandContext, session_aggregate_id
from .routing import RoutingCommands, origin_of
from .lease import LeaseToken, LeaseCommands, lease_id


class RotationCommands:
    def __init__(self, ctx: CommandContext, routing: RoutingCommands, turns: LeaseCommands) -> None:
        self.ctx = ctx
        self.routing = routing
        self.turns = turns

    def needs_compression(self, token: LeaseToken, *, prompt_tokens: int, context_length: int) -> bool:
        session = self.ctx.session(token.session_id)
        edits = session.history_edits if session is not None else ()
        message_count = history_length(self.turns.next_seq(token) - 1, edits)
        return should_compress(message_count=message_count, prompt_tokens=prompt_tokens,
                               context_length=context_length)

    def rotate(self, token: LeaseToken, source: SessionSource, *, cause: str = "compression") -> LeaseToken:
        ctx = self.ctx
        rk = self.routing.routing_key(source)
        parent_lease = self.turns.held(token)
        route: Route | None = ctx.get(rk.route_id)
        parent: Session | None = ctx.session(token.session_id)
        if route is None or parent is None:
            raise NotFound(f"no route or session to rotate for {rk.key}")
        if route.session_id != token.session_id:
            raise InvalidRequest(f"{rk.key} no longer points at {token.session_id}")
        now = ctx.clock.now()
        actor = self.turns.owner
        child_id = ctx.new_session_id(now)
        parent.end("compression", at=now, actor=actor, cause=cause)
        child = Session.new(Session.Created, id=session_aggregate_id(child_id), at=now, actor=actor, cause=cause,
                            session_id=child_id, session_key=rk.key, origin=origin_of(source), reason="compression",
                            previous_session_id=token.session_id, parent_session_id=token.session_id)
        route.bind(child_id, reason="compression", at=now, actor=actor, cause=cause)
        parent_lease.move(epoch=token.epoch, to_session_id=child_id, at=now, actor=actor, cause=cause)
        child_lease = TurnLease.new(TurnLease.Created, id=lease_id(child_id), at=now, actor=actor, cause=cause,
                                    session_id=child_id)
        epoch = child_lease.acquire(owner=actor, owner_key=token.owner_key, generation=token.generation,
                                    turn_id=token.turn_id, ttl_s=ctx.config.lease_ttl_s, at=now, actor=actor,
                                    cause=cause, lease_now=lease_time(ctx.clock))
        self.turns.forget(token)
        try:
            ctx.save(parent, child, route, parent_lease, child_lease)
        except IntegrityError:
            raise StaleLease(f"rotation of {token.session_id} lost a race; the turn's lease moved on") from None
        assert child_lease.expires_at is not None  # just acquired
        new_token = LeaseToken(child_id, epoch, actor, token.owner_key, token.generation, token.turn_id,
                               child_lease.expires_at)
        self.turns.adopt(new_token, child_lease)
        return new_token
