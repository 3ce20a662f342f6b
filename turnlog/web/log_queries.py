"""RAW READS with no public Turnlog API yet: the viewer's only queries below the API.

Everything else in turnlog/web goes through Turnlog's public read methods. These read the log
through the projection runner's log reader (the same reader the audit timeline uses): the
events around a position (the time-travel strip), the gateways' names, and the turn series the
plot draws. Candidates for Turnlog methods.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from ..api import Turnlog
from ..domain.gateway import Gateway
from ..projections.base import event_name
from ..projections.summaries import summarize
from ..projections.timeline_query import event_data

LEASE_ACQUIRED = "turnlog:LeaseAcquired"
TURN_ENDS = ("turnlog:LeaseReleased", "turnlog:LeaseRevoked", "turnlog:LeaseMoved")


def head(t: Turnlog) -> int:
    t.catch_up()
    return t.projections.head()


def events_around(t: Turnlog, position: int, before: int = 8, after: int = 8) -> list[dict[str, Any]]:
    """The events at position-before .. position+after: position, time, name, actor, cause, summary."""
    log = t.projections.log
    with t.projections.lock:
        rows = log.read(max(0, position - before - 1), position + after, before + after + 1)
        out = []
        for row in rows:
            event = log.decode(row)
            name = event_name(row[3])
            data = event_data(event)
            out.append({"position": row[0], "at": event.timestamp.isoformat(), "event": name,
                        "actor": getattr(event, "actor", None), "cause": getattr(event, "cause", None),
                        "session_id": getattr(event, "session_id", None), "summary": summarize(name, data)})
    return out


def gateway_names(t: Turnlog) -> list[str]:
    """The names of the gateways that ever booted on this log."""
    names = []
    for stream in t.views.all_streams_of_kind("GatewayRegistered"):
        gateway: Gateway = t.app.repository.get(UUID(stream))
        names.append(gateway.name)
    return names


def turn_spans(t: Turnlog) -> list[tuple[str, float]]:
    """Every finished turn as (start time as UTC text, seconds until its lease was given back),
    read from the lease events' stored times without decoding them."""
    log = t.projections.log
    upto = head(t)
    opened: dict[Any, str] = {}
    spans = []
    with t.projections.lock:
        for row in log.scan(0, upto, (LEASE_ACQUIRED, *TURN_ENDS)):
            at = log.event_time(row)
            if row[3] == LEASE_ACQUIRED:
                opened[row[1]] = at
            elif row[1] in opened:
                start = opened.pop(row[1])
                spans.append((start, (_time(at) - _time(start)).total_seconds()))
    return spans


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def queue_depths(t: Turnlog) -> list[dict[str, Any]]:
    """Per routing key, how many inbound items wait and how many are running."""
    return [row.to_dict() for row in t.views.queue_depths()]
