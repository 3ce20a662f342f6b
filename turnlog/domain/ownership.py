"""Whose session is it: the rule /resume and `switch` apply before a key takes a session.

A session belongs to the routing keys that have pointed at it (the route's own RouteBound events,
and the RouteRegistered of a route registered already bound)
and to the user who started it, on the same platform. A chat may take back only what belongs to
it; an operator may take anything, but must say so (`force`).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from .route import Route
from .source import SessionSource


def bound_session_ids(route_events: Iterable[Any]) -> set[str]:
    """Every session a route has pointed at, from its events (RouteBound carries session_id, and so
    does the RouteRegistered of a route registered already bound)."""
    return {e.session_id for e in route_events
            if isinstance(e, (Route.Bound, Route.Created)) and e.session_id is not None}


def started_by(origin: Mapping[str, Any] | None, source: SessionSource) -> bool:
    """True when the session's origin is this source's user on this platform (a user id is needed:
    a shared chat's anonymous sender owns nothing)."""
    who = source.user_id_alt or source.user_id
    if not origin or not who or origin.get("platform") != source.platform:
        return False
    return who == (origin.get("user_id_alt") or origin.get("user_id"))


__all__ = ["bound_session_ids", "started_by"]
