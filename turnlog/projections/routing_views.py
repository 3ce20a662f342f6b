"""Reads of the routing projections' tables (`routes`, `sessions`: routing.py), as typed rows.

Each function takes the read-model connection and only reads: who catches the tables up first
is the caller's choice (views.py).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any, Iterable

import orjson

from .base import TypedRow


@dataclass(frozen=True)
class RouteRow(TypedRow):
    """A routing key and the session it points at now (None: unbound): what `Turnlog.routes` lists.
    `origin` is the source that made the route; `bound_reason` why it points where it does."""
    route_id: str
    session_key: str
    session_id: str | None
    platform: str | None
    chat_type: str | None
    origin: dict[str, Any] | None
    created_at: str
    updated_at: str
    bound_reason: str | None


@dataclass(frozen=True)
class SessionRow(TypedRow):
    """A session: its key, flags (suspended, resume_pending, ended), times and lineage (the
    session it replaced, the one it was compressed from); `routed` is whether a key points at it;
    `title` its title (/title, /branch), None when it has none."""
    session_id: str
    session_key: str
    platform: str | None
    chat_type: str | None
    display_name: str | None
    origin: dict[str, Any] | None
    created_at: str
    updated_at: str
    created_reason: str
    previous_session_id: str | None
    parent_session_id: str | None
    suspended: bool
    suspend_reason: str | None
    resume_pending: bool
    resume_reason: str | None
    resume_marked_at: str | None
    ended_at: str | None
    end_reason: str | None
    routed: bool
    title: str | None = None
    # Archived (turnlog archive): the archive file and its sha256, when; its events left the log.
    archive_file: str | None = None
    archive_sha256: str | None = None
    archived_at: str | None = None

    @property
    def archived(self) -> bool:
        return self.archive_sha256 is not None


@dataclass(frozen=True)
class SessionFlagRow(TypedRow):
    """A session waiting on an operator or a resume: what `status` lists."""
    session_id: str
    session_key: str
    reason: str | None
    marked_at: str | None = None


def _origin(text: str | None) -> dict[str, Any] | None:
    return orjson.loads(text) if text else None


def routes(db: sqlite3.Connection) -> list[RouteRow]:
    rows = db.execute("SELECT route_id, session_key, session_id, platform, chat_type, origin, created_at,"
                      " updated_at, bound_reason FROM routes ORDER BY session_key, route_id").fetchall()
    return [RouteRow(*r[:5], _origin(r[5]), *r[6:]) for r in rows]  # type: ignore[call-arg, misc]


_SESSION_SQL = (
    "SELECT s.session_id, s.session_key, s.platform, s.chat_type, s.display_name, s.origin, s.created_at,"
    " s.updated_at, s.created_reason, s.previous_session_id, s.parent_session_id, s.suspended,"
    " s.suspend_reason, s.resume_pending, s.resume_reason, s.resume_marked_at, s.ended_at, s.end_reason,"
    " EXISTS (SELECT 1 FROM routes r WHERE r.session_id = s.session_id) AS routed, s.title, s.archive_file,"
    " s.archive_sha256, s.archived_at FROM sessions s")


def _session(r: tuple[Any, ...]) -> SessionRow:
    return SessionRow(*r[:5], _origin(r[5]), *r[6:11], bool(r[11]), r[12], bool(r[13]),  # type: ignore[call-arg, misc]
                      *r[14:18], bool(r[18]), *r[19:23])


def sessions(db: sqlite3.Connection, title: str | None = None) -> list[SessionRow]:
    """Every session in creation order; with `title`, those whose title holds it (any case)."""
    if title is None:
        return [_session(r) for r in db.execute(_SESSION_SQL + " ORDER BY s.created_at, s.session_id")]
    return [_session(r) for r in db.execute(
        _SESSION_SQL + " WHERE instr(lower(s.title), lower(?)) > 0 ORDER BY s.created_at, s.session_id", (title,))]


def sessions_of(db: sqlite3.Connection, session_ids: Iterable[str], platform: str | None,
                user: str | None) -> list[SessionRow]:
    """The sessions named, and those whose origin is `user` on `platform` (its user_id_alt, else
    its user_id: domain/ownership.started_by, which the caller still applies), newest first."""
    ids = sorted(set(session_ids))
    marks = ",".join("?" * len(ids)) or "NULL"
    started = ("s.platform=? AND coalesce(json_extract(s.origin, '$.user_id_alt'),"
               " json_extract(s.origin, '$.user_id'))=?" if platform and user else "0")
    args = [*ids, *((platform, user) if platform and user else ())]
    return [_session(r) for r in db.execute(
        _SESSION_SQL + f" WHERE s.session_id IN ({marks}) OR {started} ORDER BY s.created_at DESC, s.session_id DESC",
        args)]


def titled(db: sqlite3.Connection) -> list[tuple[str, str]]:
    """(session_id, title) of every titled session, newest first."""
    return [tuple(r) for r in db.execute(  # type: ignore[misc]
        "SELECT session_id, title FROM sessions WHERE title IS NOT NULL ORDER BY created_at DESC, session_id DESC")]


def title_holder(db: sqlite3.Connection, title: str) -> str | None:
    row = db.execute("SELECT session_id FROM sessions WHERE title=?", (title,)).fetchone()
    return row[0] if row else None


def session(db: sqlite3.Connection, session_id: str) -> SessionRow | None:
    row = db.execute(_SESSION_SQL + " WHERE s.session_id=?", (session_id,)).fetchone()
    return _session(row) if row else None


def session_exists(db: sqlite3.Connection, session_id: str) -> bool:
    return db.execute("SELECT 1 FROM sessions WHERE session_id=?", (session_id,)).fetchone() is not None


def route_ids_of_key(db: sqlite3.Connection, key: str) -> list[str]:
    """Every route whose key string is `key` (ids containing ':' can make two), or the route whose id it is."""
    return [r[0] for r in db.execute("SELECT route_id FROM routes WHERE session_key=? OR route_id=? ORDER BY route_id",
                                     (key, key))]


def current_session(db: sqlite3.Connection, route_id: str) -> str | None:
    row = db.execute("SELECT session_id FROM routes WHERE route_id=?", (route_id,)).fetchone()
    return row[0] if row else None


def compression_child(db: sqlite3.Connection, parent_session_id: str) -> str | None:
    """The newest session that continues `parent_session_id` after a compression rotation."""
    row = db.execute("SELECT session_id FROM sessions WHERE parent_session_id=? AND created_reason='compression'"
                     " ORDER BY created_at DESC, session_id DESC LIMIT 1", (parent_session_id,)).fetchone()
    return row[0] if row else None


def resume_pending(db: sqlite3.Connection) -> list[SessionFlagRow]:
    """Open sessions marked resume_pending, oldest mark first."""
    return [SessionFlagRow(*r) for r in db.execute(
        "SELECT session_id, session_key, resume_reason, resume_marked_at FROM sessions"
        " WHERE resume_pending=1 AND suspended=0 AND ended_at IS NULL ORDER BY resume_marked_at")]


def resume_pending_any(db: sqlite3.Connection) -> list[SessionFlagRow]:
    """Open sessions marked resume_pending, suspended or not (what `status` shows)."""
    return [SessionFlagRow(*r) for r in db.execute(
        "SELECT session_id, session_key, resume_reason, resume_marked_at FROM sessions"
        " WHERE resume_pending=1 AND ended_at IS NULL")]


def suspended(db: sqlite3.Connection) -> list[SessionFlagRow]:
    return [SessionFlagRow(*r) for r in db.execute(
        "SELECT session_id, session_key, suspend_reason FROM sessions WHERE suspended=1 AND ended_at IS NULL")]
