"""Whether a session is archived now: the last event of its archive records (domain/archive.py)."""

from __future__ import annotations

from ..domain.archive import SessionArchived, archived_session_stream
from .context import CommandContext


def archived_in(ctx: CommandContext, session_id: str) -> str | None:
    """The archive file the session is in now (None: it is not archived), read from the log."""
    last = list(ctx.app.events.get(archived_session_stream(session_id), desc=True, limit=1))
    return last[0].archive_file if last and isinstance(last[0], SessionArchived) else None
