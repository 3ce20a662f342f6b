"""Rekey: who gets which session when the key settings change (docs/behaviour.md §18).

Pure: given every route as it is, the sessions they point at (with the senders seen in each),
and a function that gives a source's key under some settings (keys.py: the one key rule), decide
which routing key points at which session afterwards. Nothing is ended and nothing is unbound:
the old routes keep their sessions, so every old session stays where it was reachable.

- shared -> per user: each sender seen in a shared session gets a route at their own key,
  pointing at the shared session (the conversation goes on; `/new` from one of them splits off).
- per user -> shared: the chat's shared key points at its most recently active per-user
  session; the others stay listed and resumable (`kept`).
- Where several sessions could take one new key (the key already points somewhere, or several
  old routes lead to it), the most recently active one takes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, Mapping

from .key_settings import KeySettings
from .keys import RoutingKey
from .source import SessionSource

# Why a key was pointed at a session by a rekey (RouteBound.reason).
SHARED_TO_PER_USER = "rekey_shared_to_per_user"
PER_USER_TO_SHARED = "rekey_per_user_to_shared"
REKEYED = "rekey"
# Why a session was left where it is (RekeyKept.reason).
NEWER_SESSION_WON = "a more recently active session took the new key"
NO_ORIGIN = "the route records no source to compute its new key from"

# Under these every sender has a key of their own: a route whose key differs from its origin's
# key under them is a shared one.
_EVERYONE_APART = KeySettings(group_sessions_per_user=True, thread_sessions_per_user=True)

KeyOf = Callable[[SessionSource, KeySettings], RoutingKey]


@dataclass(frozen=True)
class RouteState:
    """A route as the planner needs it: its key, the source it records, the session it points at."""
    route_id: str
    session_key: str
    origin: Mapping[str, Any] | None
    session_id: str | None


@dataclass(frozen=True)
class SessionState:
    """A live (not ended) session: when it was last active, and the senders seen in it."""
    session_id: str
    last_activity: datetime
    participants: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class RekeyMove:
    """One routing key pointed at a session: `old_key` (the route it comes from) -> `new_key` ->
    `session_id`, and why. `previous_session_id`: what the new key pointed at before (None: the key is new)."""
    old_key: str
    new_key: str
    session_id: str
    reason: str
    old_route_id: str
    new_route_id: str
    new_route_parts: tuple[str, ...]
    previous_session_id: str | None
    origin: dict[str, Any] = field(compare=False)  # the source the new key's route is registered with

    def to_dict(self) -> dict[str, Any]:
        return {"old_key": self.old_key, "new_key": self.new_key, "session_id": self.session_id,
                "reason": self.reason, "old_route_id": self.old_route_id, "new_route_id": self.new_route_id,
                "previous_session_id": self.previous_session_id}


@dataclass(frozen=True)
class RekeyKept:
    """A session no new key points at: still listed (`sessions`), shown (`show`) and resumable by
    its owners (`/resume`, `switch`), and still the session of its old key."""
    old_key: str
    session_id: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class RekeyPlan:
    old: KeySettings
    new: KeySettings
    moves: tuple[RekeyMove, ...]
    kept: tuple[RekeyKept, ...]


@dataclass(frozen=True)
class _Claim:
    session_id: str
    route: RouteState
    origin: dict[str, Any]
    reason: str


def plan_rekey(routes: Iterable[RouteState], sessions: Mapping[str, SessionState], old: KeySettings,
               new: KeySettings, key_of: KeyOf) -> RekeyPlan:
    """The moves that make every live session reachable under `new` (see the module docstring).
    `sessions`: the live sessions routes point at (a route whose session is missing or ended has
    nothing to carry over)."""
    routes = list(routes)
    by_id = {r.route_id: r for r in routes}
    claims: dict[str, list[_Claim]] = {}
    new_keys: dict[str, RoutingKey] = {}
    kept: list[RekeyKept] = []
    for route in routes:
        if route.session_id is None or route.session_id not in sessions:
            continue
        if not route.origin:
            kept.append(RekeyKept(route.session_key, route.session_id, NO_ORIGIN))
            continue
        origin = SessionSource.from_dict(route.origin)
        shared = str(key_of(origin, _EVERYONE_APART).route_id) != route.route_id
        senders = [*sessions[route.session_id].participants, route.origin] if shared else [route.origin]
        for sender in senders:
            key = key_of(SessionSource.from_dict(sender), new)
            if str(key.route_id) == route.route_id:
                continue
            reason = (SHARED_TO_PER_USER if shared and not key.shared
                      else PER_USER_TO_SHARED if not shared and key.shared else REKEYED)
            new_keys[str(key.route_id)] = key
            found = claims.setdefault(str(key.route_id), [])
            # One claim per session and key: the latest sender seen is the new route's origin.
            found[:] = [c for c in found if c.session_id != route.session_id]
            found.append(_Claim(route.session_id, route, _without_message_id(sender), reason))
    moves: list[RekeyMove] = []
    routed: set[str] = set()  # sessions some key of the new rule points at afterwards
    for route_id, found in claims.items():
        current = by_id.get(route_id)
        held = current.session_id if current is not None and current.session_id in sessions else None
        best = max(found, key=lambda c: _recency(sessions[c.session_id]))
        if held is not None and _recency(sessions[held]) >= _recency(sessions[best.session_id]):
            routed.add(held)
            continue
        if current is not None and held is not None:
            kept.append(RekeyKept(current.session_key, held, NEWER_SESSION_WON))  # unless routed: see below
        routed.add(best.session_id)
        key = new_keys[route_id]
        moves.append(RekeyMove(
            old_key=best.route.session_key, new_key=key.key, session_id=best.session_id, reason=best.reason,
            old_route_id=best.route.route_id, new_route_id=route_id, new_route_parts=key.parts,
            previous_session_id=current.session_id if current is not None else None, origin=best.origin))
    for found in claims.values():
        kept += [RekeyKept(c.route.session_key, c.session_id, NEWER_SESSION_WON) for c in found]
    moves.sort(key=lambda m: (m.old_key, m.new_key, m.new_route_id))
    return RekeyPlan(old, new, tuple(moves), _unique([k for k in kept if k.session_id not in routed]))


def _recency(session: SessionState) -> tuple[datetime, str]:
    return session.last_activity, session.session_id


def _unique(kept: list[RekeyKept]) -> tuple[RekeyKept, ...]:
    """Each left-behind session once."""
    seen: dict[str, RekeyKept] = {}
    for k in kept:
        seen.setdefault(k.session_id, k)
    return tuple(sorted(seen.values(), key=lambda k: (k.old_key, k.session_id)))


def _without_message_id(source: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in source.items() if k != "message_id"}


__all__ = ["PER_USER_TO_SHARED", "REKEYED", "SHARED_TO_PER_USER", "RekeyKept", "RekeyMove", "RekeyPlan",
           "RouteState", "SessionState", "plan_rekey"]
