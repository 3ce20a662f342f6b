"""Forking a session at a log position: a new session whose transcript is the original's up to
there, with its lineage recorded as events (the new session's parent and the copied messages'
cause name the origin)."""

from __future__ import annotations

from typing import Any

from ..domain.lease import TurnLease
from ..domain.route import Route
from ..domain.session import Session
from ..domain.transcript import MessageAppended, read_transcript, transcript_id
from ..errors import NotFound
from .context import CommandContext, session_aggregate_id
from .lease import lease_id
from .titles import TitleCommands


class ForkCommands:
    def __init__(self, ctx: CommandContext, titles: TitleCommands) -> None:
        self.ctx = ctx
        self.titles = titles

    def fork(self, session_id: str, upto_seq: int, *, at_position: int, route_id: Any = None,
             title: str | None = None, actor: str = "cli", cause: str | None = None) -> str:
        """`title`: the new session's title, claimed with it (InvalidRequest when another holds it)."""
        ctx = self.ctx
        source: Session | None = ctx.session(session_id)
        if source is None:
            raise NotFound(f"no session {session_id!r}")
        now = ctx.clock.now()
        cause = cause or f"fork:{session_id}@#{at_position}"
        fork_id = ctx.new_session_id(now)
        fork = Session.new(Session.Created, id=session_aggregate_id(fork_id), at=now, actor=actor, cause=cause,
                           session_id=fork_id, session_key=source.session_key, origin=source.origin, reason="fork",
                           previous_session_id=None, parent_session_id=session_id)
        claims = self.titles.claim(fork, title, actor=actor, cause=cause) if title is not None else []
        copies = [
            MessageAppended(originator_id=transcript_id(fork_id), originator_version=m.originator_version,
                            timestamp=now, session_id=fork_id, role=m.role, content=m.content,
                            tool_calls=m.tool_calls, tool_call_id=m.tool_call_id, name=m.name,
                            token_count=m.token_count, finish_reason=m.finish_reason,
                            platform_message_id=m.platform_message_id, epoch=0, turn_id=f"fork:{session_id}",
                            actor=actor, cause=cause)
            for m in read_transcript(ctx.app.events.get, session_id, upto=upto_seq)
        ]
        lease = TurnLease.new(TurnLease.Created, id=lease_id(fork_id), at=now, actor=actor, cause=cause,
                              session_id=fork_id)
        lease.seed(len(copies), at=now, actor=actor, cause=cause)
        items: list[Any] = [fork, *claims, lease, *copies]
        if route_id is not None:
            route: Route | None = ctx.get(route_id)
            if route is None:
                raise NotFound("no such routing key")
            previous = ctx.session(route.session_id) if route.session_id else None
            if previous is not None:
                previous.end("session_switch", at=now, actor=actor, cause=cause)
                items.append(previous)
            route.bind(fork_id, reason="fork", at=now, actor=actor, cause=cause)
            items.append(route)
        ctx.save(*items)
        return fork_id
