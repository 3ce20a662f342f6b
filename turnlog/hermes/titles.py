"""Hermes' `sessions.title` and turnlog's SessionTitled, both ways.

Import: a row's title becomes a SessionTitled event of the imported session, cleaned as Hermes
cleans titles; one that cannot be kept (too long, or held by a session of this log already) is
reported as skipped and stays in the import record. Export: the log's title is written back,
except for sessions imported before titles were events, whose record's title is kept unless a
titled session now holds it (state.db's unique index on sessions.title).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..commands.context import session_aggregate_id
from ..commands.titles import TitleCommands
from ..domain.imported import HermesSessionImported
from ..domain.session import Session
from ..domain.titles import clean_title
from ..errors import InvalidRequest

if TYPE_CHECKING:
    from ..projections.views import Views

TITLED = "turnlog:SessionTitled"


def import_title(titles: TitleCommands, session: Session, row: dict[str, Any], skipped: list[dict[str, str]],
                 say: dict[str, Any]) -> list[Any]:
    """Record the row's title on the imported session; returns the title's claim to save with it."""
    raw = row.get("title")
    try:
        title = clean_title(raw if isinstance(raw, str) else None)
        return titles.claim(session, title, **say) if title is not None else []
    except InvalidRequest as e:
        skipped.append({"what": f"title of session {row['id']}",
                        "reason": f"{str(e).rstrip('.')}: kept in the import record"})
        return []


def export_titles(views: "Views", sessions: list[dict[str, Any]],
                  records: dict[str, HermesSessionImported]) -> dict[str, str | None]:
    """session id -> the sessions.title to write."""
    titled = {e.originator_id for e in views.events_of(TITLED)}
    titles: dict[str, str | None] = {s["session_id"]: s.get("title") for s in sessions}
    held = {t for t in titles.values() if t}
    for session_id, record in records.items():
        old = record.row.get("title")
        if session_id in titles and old and old not in held and session_aggregate_id(session_id) not in titled:
            titles[session_id] = old
            held.add(old)
    return titles
