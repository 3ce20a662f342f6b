"""Rekey: change the key settings and carry every live session over to its keys under them.

The decision is domain/rekey.py's; this module reads what it needs from the log (each route, its
session, the senders its inbox saw run in that session), and saves the moves (RouteRegistered,
RouteBound) with the KeySettingsChanged event in one transaction: a reader sees the old rule
with the old routes, or the new rule with the new ones, never half of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable
from uuid import UUID

from ..domain.inbox import HUMAN, Inbox, inbox_id
from ..domain.key_settings import KEY_SETTINGS_ID, KeySettings, KeySettingsChanged
from ..domain.rekey import RekeyKept, RekeyMove, RouteState, SessionState, plan_rekey
from ..domain.route import Route
from .context import CommandContext
from .routing import RoutingCommands


@dataclass(frozen=True)
class RekeyReport:
    """What a rekey did (or, dry, would do): the settings before and after, each move (old key ->
    new key -> session, and why) and the sessions no new key points at (still listed and
    resumable). `position`: the log position of its last event (0 when nothing was written)."""
    old: KeySettings
    new: KeySettings
    dry_run: bool
    moves: tuple[RekeyMove, ...]
    kept: tuple[RekeyKept, ...]
    position: int

    @property
    def changed(self) -> bool:
        """Whether the settings differ (a rekey to the settings in force records nothing)."""
        return self.old != self.new

    def to_dict(self) -> dict[str, Any]:
        return {"old": self.old.to_dict(), "new": self.new.to_dict(), "changed": self.changed,
                "dry_run": self.dry_run, "moves": [m.to_dict() for m in self.moves],
                "kept": [k.to_dict() for k in self.kept], "position": self.position}


class RekeyCommands:
    """`route_ids()` lists every route's id (the routes read model): the routes themselves, their
    sessions and inboxes are then read from the log, which is the judge."""

    def __init__(self, ctx: CommandContext, routing: RoutingCommands, route_ids: Callable[[], Iterable[str]]) -> None:
        self.ctx = ctx
        self.routing = routing
        self.route_ids = route_ids

    def run(self, new: KeySettings, *, dry_run: bool, actor: str, cause: str) -> RekeyReport:
        return self.ctx.retrying(lambda: self._attempt(new, dry_run, actor, cause), "rekeying")

    def _attempt(self, new: KeySettings, dry_run: bool, actor: str, cause: str) -> RekeyReport:
        ctx = self.ctx
        recorded = ctx.recorded_key_settings()
        old = ctx.key_settings(fresh=True)
        if old == new:
            return RekeyReport(old, new, dry_run, (), (), 0)
        routes = [route for route_id in self.route_ids() if (route := ctx.get(UUID(route_id))) is not None]
        states = [RouteState(str(r.id), r.session_key, r.origin, r.session_id) for r in routes]
        plan = plan_rekey(states, self._live_sessions(routes), old, new, self.routing.key_under)
        if dry_run:
            return RekeyReport(old, new, True, plan.moves, plan.kept, 0)
        now = ctx.clock.now()
        by_id = {str(r.id): r for r in routes}
        changed: list[Route] = []
        for move in plan.moves:
            route = by_id.get(move.new_route_id)
            if route is None:  # one move per new route (plan_rekey): registered bound
                route = Route.register(UUID(move.new_route_id), move.new_key, move.new_route_parts, move.origin,
                                       at=now, actor=actor, cause=cause, session_id=move.session_id,
                                       reason=move.reason)
                by_id[move.new_route_id] = route
            else:
                route.bind(move.session_id, reason=move.reason, at=now, actor=actor, cause=cause)
            changed.append(route)
        event = KeySettingsChanged(
            originator_id=KEY_SETTINGS_ID, originator_version=(recorded.originator_version + 1) if recorded else 1,
            timestamp=now, old=old.to_dict(), new=new.to_dict(), moves=len(plan.moves), actor=actor, cause=cause)
        position = ctx.save(*changed, event)
        ctx.known_key_settings = new
        return RekeyReport(old, new, False, plan.moves, plan.kept, position)

    def _live_sessions(self, routes: list[Route]) -> dict[str, SessionState]:
        sessions: dict[str, SessionState] = {}
        for route in routes:
            if route.session_id is None or route.session_id in sessions:
                continue
            session = self.ctx.session(route.session_id)
            if session is None or session.ended:
                continue
            seen = [*([session.origin] if session.origin else []), *self._senders(route, session.session_id)]
            sessions[session.session_id] = SessionState(session.session_id, session.last_activity, tuple(seen))
        return sessions

    def _senders(self, route: Route, session_id: str) -> list[dict[str, Any]]:
        """The sources of the human messages the route's inbox ran in the session, in order
        (a merged burst counts each of its messages' senders)."""
        sources: dict[str, list[dict[str, Any]]] = {}
        ran: list[dict[str, Any]] = []
        for event in self.ctx.app.events.get(inbox_id(route.id)):
            if isinstance(event, Inbox.Accepted) and event.kind == HUMAN and event.source:
                sources.setdefault(event.merged_into or event.item_id, []).append(event.source)
            if isinstance(event, (Inbox.Accepted, Inbox.Started)) and event.session_id == session_id:
                ran += sources.pop(event.item_id, [])
        return ran
