"""The public Python API: open a store, route messages, change sessions, read the projections."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable
from uuid import UUID

import orjson

from .clock import Clock, SessionIdFactory, SystemClock, hermes_session_id
from .commands.context import CommandContext
from .commands.routing import RouteResult, RoutingCommands
from .commands.store import open_application, parse_location
from .config import EngineConfig
from .domain.keys import resolve_routing_key
from .domain.source import SessionSource
from .errors import InvalidRequest, NotFound
from .projections.routing import RoutesProjection, SessionsProjection
from .projections.runner import ProjectionRunner
from .projections.timeline import TimelineProjection

DEFAULT_DB = "turnlog.db"

_ROUTING_JSON_README = (
    "Routing map exported by turnlog from its event log (sessions.json-compatible). "
    "Keys starting with '_' are not routes."
)


@dataclass(frozen=True)
class HistoryEntry:
    position: int
    at: str
    event: str
    actor: str | None
    cause: str | None
    session_id: str | None
    session_key: str | None
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Turnlog:
    """One gateway's session engine on one event log.

    Thread-safe: share one instance between the threads of a process. Several processes may open
    the same SQLite file (or PostgreSQL database) at once.
    """

    def __init__(self, location: str | os.PathLike[str] = DEFAULT_DB, *, config: EngineConfig | None = None,
                 clock: Clock | None = None, session_ids: SessionIdFactory | None = None,
                 views: str | None = None) -> None:
        self.location = parse_location(location, views)
        self.config = config or EngineConfig()
        self.clock = clock or SystemClock()
        self.app = open_application(self.location)
        self.ctx = CommandContext(self.app, self.clock, session_ids or hermes_session_id, self.config)
        self.routing = RoutingCommands(self.ctx)
        self.projections = ProjectionRunner(
            self.app, self.location.views_path,
            [RoutesProjection(), SessionsProjection(), TimelineProjection()],
        )

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        self.projections.close()
        self.app.close()

    def __enter__(self) -> "Turnlog":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- routing ----------------------------------------------------------------------------

    def get_or_create_session(self, source: SessionSource, force_new: bool = False,
                              touch_activity: bool = True, *, actor: str | None = None,
                              cause: str | None = None) -> RouteResult:
        return self.routing.get_or_create_session(source, force_new=force_new, touch_activity=touch_activity,
                                                  actor=actor, cause=cause)

    def switch_session(self, key: str | SessionSource, session_id: str, *, actor: str = "api",
                       cause: str = "switch_session") -> RouteResult | None:
        route_id = self._route_id(key, must_exist=False)
        if route_id is None:
            return None
        return self.routing.switch_session(route_id, session_id, actor=actor, cause=cause)

    def suspend(self, key_or_session: str | SessionSource, reason: str = "operator", *,
                actor: str = "api", cause: str = "suspend") -> bool:
        return self.routing.change_session(self._session_id(key_or_session), "suspend",
                                           actor=actor, cause=cause, reason=reason)

    def mark_resume_pending(self, key_or_session: str | SessionSource, reason: str = "restart_timeout", *,
                            actor: str = "api", cause: str = "mark_resume_pending") -> bool:
        return self.routing.change_session(self._session_id(key_or_session), "mark_resume_pending",
                                           actor=actor, cause=cause, reason=reason)

    def clear_resume_pending(self, key_or_session: str | SessionSource, *, actor: str = "api",
                             cause: str = "clear_resume_pending") -> bool:
        return self.routing.change_session(self._session_id(key_or_session), "clear_resume_pending",
                                           actor=actor, cause=cause)

    # -- reads (each catches the projections up first: read-your-writes) -------------------

    def catch_up(self) -> int:
        return self.projections.catch_up()

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        self.catch_up()
        cursor = self.projections.db.execute(sql, tuple(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]

    def routes(self) -> list[dict[str, Any]]:
        rows = self._query("SELECT route_id, session_key, session_id, platform, chat_type, origin, created_at,"
                           " updated_at, bound_reason FROM routes ORDER BY session_key, route_id")
        return [_decode_origin(r) for r in rows]

    def sessions(self) -> list[dict[str, Any]]:
        rows = self._query(
            "SELECT s.session_id, s.session_key, s.platform, s.chat_type, s.display_name, s.origin, s.created_at,"
            " s.updated_at, s.created_reason, s.previous_session_id, s.parent_session_id, s.suspended,"
            " s.suspend_reason, s.resume_pending, s.resume_reason, s.resume_marked_at, s.ended_at, s.end_reason,"
            " EXISTS (SELECT 1 FROM routes r WHERE r.session_id = s.session_id) AS routed"
            " FROM sessions s ORDER BY s.created_at, s.session_id")
        for r in rows:
            for flag in ("suspended", "resume_pending", "routed"):
                r[flag] = bool(r[flag])
        return [_decode_origin(r) for r in rows]

    def session(self, session_id: str) -> dict[str, Any]:
        for row in self._query("SELECT session_id FROM sessions WHERE session_id=?", (session_id,)):
            return next(s for s in self.sessions() if s["session_id"] == row["session_id"])
        raise NotFound(f"no session {session_id!r}")

    def history(self, key_or_session: str | SessionSource) -> list[HistoryEntry]:
        self.catch_up()
        columns = "position, at, event, actor, cause, session_id, session_key, data"
        if isinstance(key_or_session, str) and self._is_session(key_or_session):
            rows = self._query(f"SELECT {columns} FROM timeline WHERE session_id=? ORDER BY position",
                               (key_or_session,))
        else:
            route_ids = self._route_ids(key_or_session)
            marks = ",".join("?" * len(route_ids))
            rows = self._query(
                f"SELECT {columns} FROM timeline WHERE route_id IN ({marks}) OR session_id IN"
                f" (SELECT session_id FROM timeline WHERE route_id IN ({marks}) AND session_id IS NOT NULL)"
                " ORDER BY position", (*route_ids, *route_ids))
        return [HistoryEntry(**{**r, "data": orjson.loads(r["data"])}) for r in rows]

    def export_routing(self) -> dict[str, Any]:
        """The routing map as Hermes' sessions.json: session_key -> entry (spec §3.1)."""
        sessions = {s["session_id"]: s for s in self.sessions()}
        out: dict[str, Any] = {"_README": _ROUTING_JSON_README}
        for route in self.routes():
            session = sessions.get(route["session_id"])
            if session is None:
                continue
            out[route["session_key"]] = _hermes_entry(route, session)
        return out

    def rebuild(self, names: Iterable[str] | None = None) -> int:
        selected = list(names) if names is not None else None
        unknown = sorted(set(selected or ()) - set(self.projections.projections))
        if unknown:
            raise InvalidRequest(f"unknown projection {unknown[0]!r} (known: {', '.join(self.projections.projections)})")
        return self.projections.rebuild(selected)

    # -- resolving what the caller named ---------------------------------------------------

    def routing_key(self, source: SessionSource) -> str:
        return self.routing.routing_key(source).key

    def _is_session(self, text: str) -> bool:
        return bool(self._query("SELECT 1 FROM sessions WHERE session_id=?", (text,)))

    def _route_ids(self, key: str | SessionSource) -> list[str]:
        if isinstance(key, SessionSource):
            return [str(self.routing.routing_key(key).route_id)]
        rows = self._query("SELECT route_id FROM routes WHERE session_key=? ORDER BY route_id", (key,))
        if not rows:
            raise NotFound(f"no routing key or session {key!r}")
        return [r["route_id"] for r in rows]

    def _route_id(self, key: str | SessionSource, *, must_exist: bool = True) -> UUID | None:
        try:
            route_ids = self._route_ids(key)
        except NotFound:
            if must_exist:
                raise
            return None
        if len(route_ids) > 1:
            raise InvalidRequest(f"routing key {key!r} names {len(route_ids)} routes (ids containing ':');"
                                 " pass the SessionSource instead")
        return UUID(route_ids[0])

    def _session_id(self, key_or_session: str | SessionSource) -> str:
        if isinstance(key_or_session, str) and self._is_session(key_or_session):
            return key_or_session
        route_id = self._route_id(key_or_session)
        rows = self._query("SELECT session_id FROM routes WHERE route_id=?", (str(route_id),))
        if not rows or rows[0]["session_id"] is None:
            raise NotFound(f"routing key {key_or_session!r} has no current session")
        return rows[0]["session_id"]


def _decode_origin(row: dict[str, Any]) -> dict[str, Any]:
    if row.get("origin"):
        row["origin"] = orjson.loads(row["origin"])
    return row


_AUTO_RESET_REASONS = {"idle", "daily", "suspended", "resume_pending_expired"}


def _hermes_entry(route: dict[str, Any], session: dict[str, Any]) -> dict[str, Any]:
    reason = session["created_reason"]
    return {
        "session_key": route["session_key"],
        "session_id": session["session_id"],
        "created_at": session["created_at"],
        "updated_at": session["updated_at"],
        "origin": route["origin"],
        "display_name": session["display_name"],
        "platform": route["platform"],
        "chat_type": route["chat_type"] or "dm",
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "total_tokens": 0,
        "last_prompt_tokens": 0,
        "estimated_cost_usd": 0.0,
        "cost_status": "unknown",
        "was_auto_reset": reason in _AUTO_RESET_REASONS,
        "auto_reset_reason": reason if reason in _AUTO_RESET_REASONS else None,
        "reset_had_activity": False,
        "is_fresh_reset": reason == "force_new",
        "expiry_finalized": False,
        "suspended": session["suspended"],
        "resume_pending": session["resume_pending"],
        "resume_reason": session["resume_reason"],
        "last_resume_marked_at": session["resume_marked_at"],
        "model_override": None,
    }


def open(location: str | os.PathLike[str] = DEFAULT_DB, **options: Any) -> Turnlog:  # noqa: A001
    return Turnlog(location, **options)
