"""Background delegations: started from a session, finished from any process, stopped by /stop
and /new (docs/behaviour.md §8a).

A finish is recorded with the wake-up it makes, in one transaction, on the inbox of the key the
delegation started on: whichever gateway next runs that key's queue runs it, so a result is never
orphaned by a restart or by finishing in another process. The wake-up is pinned to the session
that started the work and judged when it is processed, fail-closed (`owner_gone`).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Callable, Sequence

from ..domain.delegation import STATUSES, Delegation, delegation_id, wakeup_text
from ..domain.inbox import WAKEUP, InboxItem
from ..domain.keys import RoutingKey
from ..domain.route import Route
from ..domain.session import Session
from ..domain.source import SessionSource
from ..errors import InvalidRequest, NotFound
from .context import CommandContext
from .inbound import InboundCommands
from .routing import RoutingCommands, origin_of

StopHook = Callable[[str], Any]
WAKEUP_ACTOR = "system:wakeup"
OWNER_CLOSED = "owner_session_closed"
LINEAGE_LIMIT = 64  # compression rotations followed back from the key's session

log = logging.getLogger("turnlog.delegations")


def new_handle() -> str:
    return f"dlg_{uuid.uuid4().hex[:12]}"


class DelegationCommands:
    def __init__(self, ctx: CommandContext, routing: RoutingCommands, inbound: InboundCommands,
                 on_stop: StopHook | None = None) -> None:
        self.ctx = ctx
        self.routing = routing
        self.inbound = inbound
        self.on_stop = on_stop

    def start(self, source_or_session: SessionSource | str, handle: str | None, *, description: str, actor: str,
              cause: str) -> str:
        """Record DelegationStarted on the session a source's key points at (or the session named)."""
        handle = handle or new_handle()
        if not isinstance(handle, str) or not handle.strip():
            raise InvalidRequest("a delegation handle must be a non-empty string")
        if not isinstance(description, str):
            raise InvalidRequest("a delegation's description must be a string")

        def step() -> str:
            session, rk, origin = self._owner(source_or_session)
            if self.ctx.get(delegation_id(handle)) is not None:
                raise InvalidRequest(f"delegation {handle!r} exists already")
            now = self.ctx.clock.now()
            delegation = Delegation.new(Delegation.Created, id=delegation_id(handle), at=now, actor=actor,
                                        cause=cause, handle=handle, session_id=session.session_id,
                                        session_key=rk.key, owner_route_id=str(rk.route_id), source=origin,
                                        description=description)
            session.start_child(handle, at=now, actor=actor, cause=cause)
            self.ctx.save(delegation, session)
            return handle
        return self.ctx.retrying(step, f"starting delegation {handle}")

    def _owner(self, source_or_session: SessionSource | str) -> tuple[Session, RoutingKey, dict[str, Any] | None]:
        if isinstance(source_or_session, SessionSource):
            rk = self.routing.routing_key(source_or_session)
            route: Route | None = self.ctx.get(rk.route_id)
            if route is None or route.session_id is None:
                raise NotFound(f"no session on {rk.key}: a delegation starts from a routed session")
            session = self.ctx.session(route.session_id)
            origin: dict[str, Any] | None = origin_of(source_or_session)
        else:
            session = self.ctx.session(source_or_session)
            if session is None:
                raise NotFound(f"no session {source_or_session!r}")
            if not session.origin:
                raise InvalidRequest(f"session {source_or_session} has no origin to wake up")
            origin = session.origin
            rk = self.routing.routing_key(SessionSource.from_dict(origin))
        if session is None:
            raise NotFound(f"no session for {rk.key}")
        if session.ended:
            raise InvalidRequest(f"session {session.session_id} has ended ({session.end_reason})")
        return session, rk, origin

    def finish(self, handle: str, status: str, summary: str, *, actor: str, cause: str) -> bool:
        """Record DelegationFinished and its wake-up together; False (nothing recorded) when the
        handle has finished already, from this process or any other."""
        if status not in STATUSES:
            raise InvalidRequest(f"unknown delegation status {status!r} (one of {', '.join(STATUSES)})")
        if not isinstance(summary, str):
            raise InvalidRequest("a delegation's summary must be a string")

        def step() -> bool:
            delegation: Delegation | None = self.ctx.get(delegation_id(handle))
            if delegation is None:
                raise NotFound(f"no delegation {handle!r}")
            if delegation.finished:
                return False
            source = SessionSource.from_dict(delegation.source or {})
            route: Route | None = self.ctx.get(uuid.UUID(delegation.route_id))
            # The key it started on, even if the key settings changed since.
            rk = (RoutingKey(parts=tuple(route.parts), shared=False) if route is not None
                  else self.routing.routing_key(source))
            text = wakeup_text(handle, delegation.description, status, summary)
            inbox, item_id, seen = self.inbound.accepting(rk, source, text, WAKEUP, WAKEUP_ACTOR, cause,
                                                          pinned=(delegation.session_id, handle))
            now = self.ctx.clock.now()
            delegation.finish(status, summary, item_id, at=now, actor=actor, cause=cause)
            session = self.ctx.session(delegation.session_id)
            items: list[Any] = [delegation, inbox, *seen]
            if session is not None and session.finish_child(handle, at=now, actor=actor, cause=cause):
                items.append(session)
            self.ctx.save(*items)
            return True
        return self.ctx.retrying(step, f"finishing delegation {handle}")

    # -- /stop and /new ---------------------------------------------------------------------

    def stop_running(self, session: Session | None, reason: str, *, actor: str, cause: str) -> list[Delegation]:
        """The running delegations of a session (and of those it continues after compression),
        each with DelegationStopped pending: the caller saves them with its command."""
        stopped = []
        now = self.ctx.clock.now()
        for owner in self._lineage(session):
            for handle in getattr(owner, "children", []):
                delegation: Delegation | None = self.ctx.get(delegation_id(handle))
                if delegation is not None and delegation.stop(reason, at=now, actor=actor, cause=cause):
                    stopped.append(delegation)
        return stopped

    def notify_stopped(self, stopped: Sequence[Delegation]) -> None:
        """Tell the gateway (its stop hook) to stop each unit, once the stops are recorded. A hook
        that raises is logged: the stop stands and the command still answers."""
        if self.on_stop is None:
            return
        for delegation in stopped:
            try:
                self.on_stop(delegation.handle)
            except Exception:  # noqa: BLE001 - the gateway's hook must not break /stop or /new
                log.exception("stop_delegation hook failed for %s", delegation.handle)

    def _lineage(self, session: Session | None) -> list[Session]:
        """The session, then the sessions it continues after compression rotations, newest first."""
        chain: list[Session] = []
        while session is not None and len(chain) < LINEAGE_LIMIT:
            chain.append(session)
            if session.created_reason != "compression" or not session.parent_session_id:
                break
            session = self.ctx.session(session.parent_session_id)
        return chain

    # -- a pinned wake-up, judged when processed ----------------------------------------------

    def owner_gone(self, route: Route | None, item: InboxItem) -> bool:
        """Whether a pinned wake-up may no longer run: the key no longer points at its session (nor
        at one continuing it after compression), that session has ended, or routing the wake-up
        would replace it (suspended, or expired by the reset policy). Fail-closed: such a wake-up
        never reopens its session, nor goes to a session begun since (by /new or by the policy)."""
        pinned = item.pinned_session_id
        if pinned is None:
            return False
        if route is None or route.session_id is None:
            return True
        current = self.ctx.session(route.session_id)
        if current is None or current.ended:
            return True
        source = SessionSource.from_dict(item.source) if item.source else None
        if source is not None and self.routing.replacement_reason(route.session_key, current, source,
                                                                  self.ctx.clock.now()) is not None:
            return True
        return all(s.session_id != pinned for s in self._lineage(current))
