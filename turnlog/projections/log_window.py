"""Reads of the log itself, beside the read models: the events around a position (the viewer's
time-travel strip) and every finished turn's span (its turns plot), through the runner's log reader."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .base import TypedRow, event_name
from .runner import ProjectionRunner
from .summaries import summarize
from .timeline_query import event_data

LEASE_ACQUIRED = "turnlog:LeaseAcquired"
TURN_ENDS = ("turnlog:LeaseReleased", "turnlog:LeaseRevoked", "turnlog:LeaseMoved")


@dataclass(frozen=True)
class LogEvent(TypedRow):
    """One event of the log: its `position`, time, name, who wrote it and why, the session it
    concerns (None: none) and a one-line summary."""
    position: int
    at: str
    event: str
    actor: str | None
    cause: str | None
    session_id: str | None
    summary: str


@dataclass(frozen=True)
class TurnSpan(TypedRow):
    """A finished turn: when its lease was taken (UTC text) and how many seconds until it was given back."""
    started_at: str
    seconds: float


def events_around(runner: ProjectionRunner, position: int, before: int, after: int) -> list[LogEvent]:
    """The events at position-before .. position+after."""
    log = runner.log
    with runner.lock:
        out = []
        for row in log.read(max(0, position - before - 1), position + after, before + after + 1):
            event = log.decode(row)
            name = event_name(row[3])
            out.append(LogEvent(position=row[0], at=event.timestamp.isoformat(), event=name,
                                actor=getattr(event, "actor", None), cause=getattr(event, "cause", None),
                                session_id=getattr(event, "session_id", None),
                                summary=summarize(name, event_data(event))))
    return out


def turn_spans(runner: ProjectionRunner, upto: int) -> list[TurnSpan]:
    """Every turn finished by position `upto`, read from the lease events' stored times: a plot
    of a long log must not decode every event."""
    log = runner.log
    opened: dict[Any, str] = {}
    spans = []
    with runner.lock:
        for row in log.scan(0, upto, (LEASE_ACQUIRED, *TURN_ENDS)):
            at = log.event_time(row)
            if row[3] == LEASE_ACQUIRED:
                opened[row[1]] = at
            elif row[1] in opened:
                start = opened.pop(row[1])
                spans.append(TurnSpan(start, (_time(at) - _time(start)).total_seconds()))
    return spans


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
