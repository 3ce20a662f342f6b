"""Usage of a session's messages: the MessageUsageRecorded events saved with them (domain/reply.py)."""

from __future__ import annotations

from typing import Any, Iterable

from ..domain.reply import usage_id
from ..domain.transcript import MessageAppended


def usage_of(app: Any, messages: Iterable[MessageAppended]) -> list[dict[str, Any]]:
    """One row per message that has usage or a model recorded, in transcript order."""
    rows = []
    for m in messages:
        if m.role != "assistant":
            continue
        for e in app.events.get(usage_id(m.session_id, m.originator_version), lte=1):
            rows.append({"seq": e.seq, "model": e.model, **e.usage, "turn_id": e.turn_id})
    return rows
