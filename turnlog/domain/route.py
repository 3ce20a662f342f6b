"""Route: one routing key and the session it currently points at.

Its id is derived from the key's parts (see keys.RoutingKey.route_id), so "create the route for
this key" is race-free across processes: a second creator gets an optimistic-concurrency conflict.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, TYPE_CHECKING

from .base import TurnlogAggregate
from .rekey import SHARED_TO_PER_USER


class Route(TurnlogAggregate):
    TOPIC = "turnlog:Route"

    if TYPE_CHECKING:  # state set by the events' apply methods
        session_key: str
        parts: tuple[str, ...]
        origin: dict[str, Any] | None
        session_id: str | None
        bound_reason: str | None  # why it points at its session (RouteBound.reason)

    class Created(TurnlogAggregate.Created):
        """`session_id`, `reason` (version 2): the session a route registered to be bound at once
        points at, and why (what a RouteBound beside it would have said); None for a route
        registered unbound (and every version-1 event, whose binding is a RouteBound after it)."""

        TOPIC = "turnlog:RouteRegistered"
        class_version = 2
        session_key: str
        parts: list[str]
        origin: dict[str, Any] | None
        session_id: str | None = None
        reason: str | None = None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["session_id"] = None
            state["reason"] = None

        def apply(self, route: "Route") -> None:
            route.session_key = self.session_key
            route.parts = tuple(self.parts)
            route.origin = self.origin
            route.session_id = self.session_id
            route.bound_reason = self.reason

    class Bound(TurnlogAggregate.Event):
        TOPIC = "turnlog:RouteBound"
        session_id: str
        previous_session_id: str | None
        reason: str

        def apply(self, route: "Route") -> None:
            route.session_id = self.session_id
            route.bound_reason = self.reason

    class Detached(TurnlogAggregate.Event):
        TOPIC = "turnlog:RouteDetached"
        session_id: str
        reason: str

        def apply(self, route: "Route") -> None:
            route.session_id = None
            route.bound_reason = None

    class OriginChanged(TurnlogAggregate.Event):
        TOPIC = "turnlog:RouteOriginChanged"
        origin: dict[str, Any]

        def apply(self, route: "Route") -> None:
            route.origin = self.origin


    class ResumeRefused(TurnlogAggregate.Event):
        """A chat asked to /resume a session that is not its own: refused, and kept for the audit."""

        TOPIC = "turnlog:ResumeRefused"
        # Not `session_id`: the audit timeline would file the other user's session under this key.
        requested_session_id: str
        reason: str

        def apply(self, route: "Route") -> None:
            pass  # an audit record: the route is unchanged

    @classmethod
    def register(cls, route_id: Any, session_key: str, parts: Iterable[str], origin: dict[str, Any] | None, *,
                 at: datetime, actor: str, cause: str, session_id: str | None = None,
                 reason: str | None = None) -> "Route":
        """A new key's route, registered already bound to `session_id` for `reason` when given:
        one event, where a registration and a RouteBound would say the same."""
        return cls.new(cls.Created, id=route_id, at=at, actor=actor, cause=cause, session_key=session_key,
                       parts=list(parts), origin=origin, session_id=session_id, reason=reason)

    def borrows_its_session(self) -> bool:
        """True when a rekey split this key off a shared session that other keys still point at:
        `/new` on it lets go of that session and leaves it to them (docs/behaviour.md §18)."""
        # Snapshots taken before the field existed lack it.
        return getattr(self, "bound_reason", None) == SHARED_TO_PER_USER

    def bind(self, session_id: str, *, reason: str, at: datetime, actor: str, cause: str) -> None:
        """Point at `session_id` (a new route is registered bound instead: `register`)."""
        if session_id != self.session_id:
            self.record(Route.Bound, at=at, actor=actor, cause=cause, session_id=session_id,
                        previous_session_id=self.session_id, reason=reason)

    def detach(self, *, reason: str, at: datetime, actor: str, cause: str) -> None:
        if self.session_id is not None:
            self.record(Route.Detached, at=at, actor=actor, cause=cause,
                        session_id=self.session_id, reason=reason)

    def refuse_resume(self, session_id: str, *, reason: str, at: datetime, actor: str, cause: str) -> None:
        self.record(Route.ResumeRefused, at=at, actor=actor, cause=cause, requested_session_id=session_id,
                    reason=reason)

    def note_origin(self, origin: dict[str, Any], *, at: datetime, actor: str, cause: str) -> None:
        if origin != self.origin:
            self.record(Route.OriginChanged, at=at, actor=actor, cause=cause, origin=origin)
