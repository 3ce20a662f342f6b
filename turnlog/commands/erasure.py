"""Erase, the part that writes events: the subject's sessions are suspended (its next message
starts a new session, under a new key) and SubjectErased is recorded."""

from __future__ import annotations

from ..domain.erasure import ERASURES_ID, SubjectErased
from .context import CommandContext
from .routing import RoutingCommands

ERASED_REASON = "erased"


class EraseCommands:
    def __init__(self, ctx: CommandContext, routing: RoutingCommands) -> None:
        self.ctx = ctx
        self.routing = routing

    def suspend(self, session_ids: list[str], *, actor: str, cause: str) -> list[str]:
        return [s for s in session_ids
                if self.routing.change_session(s, "suspend", actor=actor, cause=cause, reason=ERASED_REASON)]

    def record(self, subject_hash: str, *, keys: int, sessions: list[str], actor: str, cause: str) -> int:
        ctx = self.ctx
        event = SubjectErased(originator_id=ERASURES_ID, originator_version=ctx.app.stream_version(ERASURES_ID) + 1,
                              timestamp=ctx.clock.now(), subject_hash=subject_hash, keys=keys, sessions=sessions,
                              actor=actor, cause=cause)
        return ctx.save(event)
