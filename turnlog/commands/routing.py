"""Routing commands: which session a message belongs to, and the session lifecycle (docs/behaviour.md §3, §4).

Decisions read aggregates (strongly consistent) and save their events in one transaction, so a
race between processes is settled by optimistic concurrency: the loser re-reads and adopts the
winner's decision.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterable

from ..domain.key_settings import KeySettings
from ..domain.keys import (
    RoutingKey, legacy_account_key, legacy_slack_key, require_conversation, resolve_routing_key,
)
from ..domain.ownership import bound_session_ids
from ..domain.policy import route_decision
from ..domain.route import Route
from ..domain.session import Session
from ..domain.source import SessionSource
from ..errors import InvalidRequest, NotFound, SessionOwnedElsewhere, TurnlogError
from .archived import archived_in
from .context import CommandContext, session_aggregate_id
from .singleflight import SingleFlight

Also = Callable[[str, bool], Iterable[Any]]  # given the session the message routes to, and whether it is new


log = logging.getLogger(__name__)


def _nothing(session_id: str, new_session: bool) -> Iterable[Any]:
    return ()


# Why a new session was made, beyond the policy's reasons (idle, daily, suspended, ...).
FIRST_MESSAGE = "first_message"
FORCE_NEW = "force_new"
ROUTE_DETACHED = "route_detached"
PREVIOUS_ENDED = "previous_ended"
ARCHIVED = "archived"  # the key's session was archived (turnlog archive)
SLACK_SCOPE_MIGRATION = "slack_scope_migration"  # a pre-workspace Slack route moved to its workspace key
ACCOUNT_MIGRATION = "account_migration"  # a route keyed before its bot account was known moved to the account's key


@dataclass(frozen=True)
class RouteResult:
    session_key: str
    session_id: str
    route_id: str
    created: bool
    reason: str | None  # why a new session was made (or the route moved); None when nothing changed
    previous_session_id: str | None
    shared: bool
    position: int  # the log position of the last event this call wrote (0 if none)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def actor_of(source: SessionSource | dict[str, Any]) -> str:
    """The platform user a message came from, as events name them: `telegram:user:42`."""
    get = source.get if isinstance(source, dict) else lambda name: getattr(source, name)
    who = get("user_id_alt") or get("user_id")
    return f"{get('platform')}:user:{who}" if who else f"{get('platform')}:chat:{get('chat_id')}"


def cause_of(source: SessionSource, default: str) -> str:
    return f"message:{source.message_id}" if source.message_id else default


def origin_of(source: SessionSource) -> dict[str, Any]:
    """The source as stored on routes and sessions: without the per-message id."""
    origin = source.to_dict()
    origin.pop("message_id", None)
    return origin


def _may_move(origin: dict[str, Any], source: SessionSource, name: str) -> bool:
    """Whether a route whose key lacks the source's `name` (scope_id, account_id) may move to it."""
    wanted = getattr(source, name)
    if not wanted:
        return True  # the source names none, so the older key lacks nothing here
    named = origin.get(name)
    return named == wanted if named else source.chat_type == "dm"


class RoutingCommands:
    def __init__(self, ctx: CommandContext) -> None:
        self.ctx = ctx
        self._flight = SingleFlight()
        # Brings an archive file back (archived_key_policy "restore"); set by the Turnlog.
        self.restore_archive: Callable[[str], object] | None = None

    def routing_key(self, source: SessionSource) -> RoutingKey:
        require_conversation(source)
        return self.key_under(source, self.ctx.key_settings())

    def key_under(self, source: SessionSource, settings: KeySettings) -> RoutingKey:
        """The source's key under `settings`, with this engine's profile and WhatsApp aliases."""
        return resolve_routing_key(source, **self._key_options(source, settings))

    def _key_options(self, source: SessionSource, settings: KeySettings) -> dict[str, Any]:
        return {"profile": source.profile or self.ctx.config.profile,
                "whatsapp_aliases": self.ctx.config.whatsapp_aliases, **settings.to_dict()}

    def get_or_create_session(self, source: SessionSource, *, force_new: bool = False,
                              touch_activity: bool = True, actor: str | None = None,
                              cause: str | None = None, also: Also | None = None,
                              rk: RoutingKey | None = None) -> RouteResult:
        """`also(session_id, new_session)` builds, afresh for each try, other events to commit with the routing decision;
        such a call does its own decision instead of sharing another thread's. `rk`: the source's
        routing key, when the caller has resolved it already."""
        if not isinstance(source, SessionSource):
            raise InvalidRequest(f"source must be a SessionSource, got {type(source).__name__}")
        rk = rk or self.routing_key(source)
        actor = actor or actor_of(source)
        cause = cause or cause_of(source, "route")
        def decide() -> RouteResult:
            return self.ctx.retrying(
                lambda: self._route(rk, source, force_new, touch_activity, actor, cause, also or _nothing),
                f"routing {rk.key}",
            )
        return decide() if also is not None else self._flight.do(rk.route_id, decide)

    def _route(self, rk: RoutingKey, source: SessionSource, force_new: bool, touch_activity: bool,
               actor: str, cause: str, also: Also) -> RouteResult:
        ctx = self.ctx
        now = ctx.clock.now()
        origin = origin_of(source)
        # Cached reads are validated by the save that follows; a call that may save nothing reads fresh.
        fresh = not touch_activity
        route: Route | None = ctx.get(rk.route_id, fresh)
        if route is None:  # registered below, bound to the session it gets (one event)
            legacy = None if force_new else self._legacy_route(source)
            if legacy is not None:
                return self._adopt_legacy(*legacy, rk, origin, now, actor, cause, also)
            return self._new_session(None, rk, origin, FIRST_MESSAGE, None, now, actor, cause, also)
        current: Session | None = ctx.session(route.session_id, fresh) if route.session_id else None
        if force_new:
            reason: str | None
            reason, end_reason = FORCE_NEW, "session_reset"
        elif current is None:
            archived = archived_in(ctx, route.session_id) if route.session_id else None
            if archived is not None and self._restored(archived):
                return self._route(rk, source, force_new, touch_activity, actor, cause, also)
            reason, end_reason = (ARCHIVED if archived is not None else ROUTE_DETACHED), None
        elif current.ended:
            reason, end_reason = PREVIOUS_ENDED, None
        else:
            reason = self.replacement_reason(rk.key, current, source, now)
            end_reason = reason
            if reason is None:
                extra = list(also(current.session_id, False))
                if not touch_activity and origin == route.origin:
                    position = ctx.save(*extra) if extra else 0
                    return self._result(rk, current.session_id, False, None, None, position)
                route.note_origin(origin, at=now, actor=actor, cause=cause)
                if touch_activity:
                    current.touch(rk.key, at=now, actor=actor, cause=cause)
                position = ctx.save(route, current, *extra)
                return self._result(rk, current.session_id, False, None, None, position)
        if current is not None and end_reason is not None:
            current.end(end_reason, at=now, actor=actor if force_new else "system:policy", cause=cause)
        return self._new_session(route, rk, origin, reason, current, now, actor, cause, also)

    def _restored(self, archive: str) -> bool:
        """With archived_key_policy "restore", bring the archive back (its sessions listed and
        their transcripts read again; the key's ended session is still followed by a new one)."""
        if self.ctx.config.retention.archived_key_policy != "restore" or self.restore_archive is None:
            return False
        try:
            self.restore_archive(archive)
        except TurnlogError as e:  # a file moved away: the message still gets its new session
            log.warning("could not restore the archive %s for a message on its key: %s", archive, e)
            return False
        return True

    def _legacy_route(self, source: SessionSource) -> tuple[Route, str] | None:
        """The route stored under an older key of this source that it may take over, and why
        (docs/behaviour.md §12, §12.1); None when there is none.

        Older keys lack the bot account, or (pre-workspace Slack) the workspace and the account.
        For each of those the source names, the old route's origin must name the same one, or name
        none while the chat is a DM: the first workspace or account to arrive takes such a DM. A
        group or channel whose origin names none never moves: its id may be shared by several
        workspaces or reached by several bots, and adopting it could show one another's transcript.
        """
        options = self._key_options(source, self.ctx.key_settings())
        older = ((legacy_account_key(source, **options), ("account_id",), ACCOUNT_MIGRATION),
                 (legacy_slack_key(source, **options), ("scope_id", "account_id"), SLACK_SCOPE_MIGRATION))
        for legacy, missing, reason in older:
            if legacy is None:
                continue
            route: Route | None = self.ctx.get(legacy.route_id)
            if route is None or route.session_id is None:
                continue
            if all(_may_move(route.origin or {}, source, name) for name in missing):
                return route, reason
        return None

    def _adopt_legacy(self, legacy: Route, reason: str, rk: RoutingKey, origin: dict[str, Any],
                      now: datetime, actor: str, cause: str, also: Also) -> RouteResult:
        """The new key's route registered on the session of its older key's route, detached."""
        session: Session | None = self.ctx.session(legacy.session_id) if legacy.session_id else None
        if session is None or session.ended:
            return self._new_session(None, rk, origin, FIRST_MESSAGE, None, now, actor, cause, also)
        legacy.detach(reason=reason, at=now, actor=actor, cause=cause)
        route = Route.register(rk.route_id, rk.key, rk.parts, origin, at=now, actor=actor, cause=cause,
                               session_id=session.session_id, reason=reason)
        session.touch(rk.key, at=now, actor=actor, cause=cause)
        position = self.ctx.save(legacy, route, session, *also(session.session_id, False))
        return self._result(rk, session.session_id, False, reason, None, position)

    def replacement_reason(self, session_key: str, current: Session, source: SessionSource,
                           now: datetime) -> str | None:
        """Why a message from `source` routed on this key now would get a new session instead of
        `current` (the reset policy, a suspension), or None when it keeps it."""
        return route_decision(
            current, now=now, policy=self.ctx.config.reset.for_source(source.platform, source.chat_type),
            freshness_window_s=self.ctx.config.freshness_window_s,
            background=self._background(session_key, current.session_id),
        )

    def _background(self, session_key: str, session_id: str):  # type: ignore[no-untyped-def]
        guard = self.ctx.config.background_guard
        return None if guard is None else (lambda: guard(session_key, session_id))

    def _new_session(self, route: Route | None, rk: RoutingKey, origin: dict[str, Any], reason: str,
                     previous: Session | None, now: datetime, actor: str, cause: str,
                     also: Also = _nothing) -> RouteResult:
        """A new session for the key, its route pointed at it (None: the key's new route,
        registered bound to it)."""
        session_id = self.ctx.new_session_id(now)
        session = Session.new(
            Session.Created, id=session_aggregate_id(session_id), at=now, actor=actor, cause=cause,
            session_id=session_id, session_key=rk.key, origin=origin, reason=reason,
            previous_session_id=previous.session_id if previous else None,
            parent_session_id=None,
        )
        if route is None:
            route = Route.register(rk.route_id, rk.key, rk.parts, origin, at=now, actor=actor, cause=cause,
                                   session_id=session_id, reason=reason)
        else:
            route.note_origin(origin, at=now, actor=actor, cause=cause)
            route.bind(session_id, reason=reason, at=now, actor=actor, cause=cause)
        position = self.ctx.save(*([previous] if previous is not None else []), session, route, *also(session_id, True))
        return self._result(rk, session_id, True, reason, previous.session_id if previous else None, position)

    @staticmethod
    def _result(rk: RoutingKey, session_id: str, created: bool, reason: str | None,
                previous: str | None, position: int) -> RouteResult:
        return RouteResult(session_key=rk.key, session_id=session_id, route_id=str(rk.route_id),
                           created=created, reason=reason, previous_session_id=previous,
                           shared=rk.shared, position=position)

    # -- lifecycle commands on a route (by its aggregate id) or on a session ------------------

    def switch_session(self, route_id: Any, target_session_id: str, *, actor: str, cause: str,
                       force: bool = True) -> RouteResult | None:
        """Point a routing key at an existing session (docs/behaviour.md §4); None when the key is unknown.

        Without `force`, a session that belongs to another key (never bound to this route, last
        used under another key) is refused with SessionOwnedElsewhere."""
        def attempt() -> RouteResult | None:
            ctx = self.ctx
            route: Route | None = ctx.get(route_id)
            if route is None:
                return None
            rk = RoutingKey(parts=route.parts, shared=False)
            target = ctx.session(target_session_id)
            if target is None:
                raise NotFound(f"no session {target_session_id!r}")
            if route.session_id == target_session_id:
                return self._result(rk, target_session_id, False, None, None, 0)
            if not force and target.session_key != route.session_key and not self.has_owned(route_id, target_session_id):
                raise SessionOwnedElsewhere(
                    f"session {target_session_id} belongs to routing key {target.session_key!r}, not {route.session_key!r}")
            now = ctx.clock.now()
            previous = ctx.session(route.session_id) if route.session_id else None
            if previous is not None:
                previous.end("session_switch", at=now, actor=actor, cause=cause)
            target.reopen(route.session_key, at=now, actor=actor, cause=cause)
            route.bind(target_session_id, reason="session_switch", at=now, actor=actor, cause=cause)
            position = ctx.save(*([previous] if previous is not None else []), target, route)
            return self._result(rk, target_session_id, False, "session_switch",
                                previous.session_id if previous else None, position)
        return self.ctx.retrying(attempt, f"switching to {target_session_id}")

    def has_owned(self, route_id: Any, session_id: str) -> bool:
        """True when the route has ever pointed at the session (read from the route's own events)."""
        return session_id in bound_session_ids(self.ctx.app.events.get(route_id))

    def detach(self, route_id: Any, *, end_reason: str, actor: str, cause: str) -> str | None:
        """End the route's session and unbind it, so that the next message gets a new one."""
        def attempt() -> str | None:
            ctx = self.ctx
            route: Route | None = ctx.get(route_id)
            if route is None or route.session_id is None:
                return None
            now = ctx.clock.now()
            session = ctx.session(route.session_id)
            route.detach(reason=end_reason, at=now, actor=actor, cause=cause)
            items: list[Any] = [route]
            if session is not None:
                session.end(end_reason, at=now, actor=actor, cause=cause)
                items.append(session)
            ctx.save(*items)
            return session.session_id if session is not None else None
        return self.ctx.retrying(attempt, "detaching a route")

    def change_session(self, session_id: str, change: str, *, actor: str, cause: str,
                       reason: str | None = None) -> bool:
        """suspend / mark_resume_pending / clear_resume_pending; False when the state refuses it."""
        def attempt() -> bool:
            ctx = self.ctx
            session = ctx.session(session_id)
            if session is None:
                raise NotFound(f"no session {session_id!r}")
            now = ctx.clock.now()
            if change == "suspend":
                changed = session.suspend(reason or "operator", at=now, actor=actor, cause=cause)
            elif change == "mark_resume_pending":
                changed = session.mark_resume_pending(reason or "restart_timeout", at=now, actor=actor, cause=cause)
            elif change == "clear_resume_pending":
                changed = session.clear_resume_pending(at=now, actor=actor, cause=cause)
            else:
                raise InvalidRequest(f"unknown session change {change!r}")
            if changed:
                ctx.save(session)
            return changed
        return self.ctx.retrying(attempt, f"{change} on {session_id}")
