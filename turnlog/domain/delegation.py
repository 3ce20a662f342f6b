"""Delegation: background work an agent started from a session (a subagent, a long job) that
outlives its turn (docs/behaviour.md §8a).

Its stream is named by its handle, so any process that opens the same log can report its finish.

    running --stopped(reason)--> stopped --finished(status)--> finished
    running --finished(status)--> finished      (a second finish is refused: recorded once)

A stopped delegation may still report its finish (the unit wraps up with what it did); the
finish is recorded then, and the wake-up it makes is judged when processed like any other.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TYPE_CHECKING
from uuid import UUID

from .base import TurnlogAggregate, stream_id

RUNNING = "running"
STOPPED = "stopped"
FINISHED = "finished"
STATES = (RUNNING, STOPPED, FINISHED)
STATUSES = ("succeeded", "failed", "cancelled")


def delegation_id(handle: str) -> UUID:
    return stream_id("delegation", handle)


def wakeup_text(handle: str, description: str, status: str, summary: str) -> str:
    """The wake-up the owning session's next turn answers: what finished, how, and its result."""
    what = f" ({description})" if description else ""
    return f"[Background delegation {handle}{what} {status}.]" + (f"\n{summary}" if summary else "")


class Delegation(TurnlogAggregate):
    TOPIC = "turnlog:Delegation"

    if TYPE_CHECKING:  # state set by the events' apply methods
        handle: str
        session_id: str
        session_key: str
        route_id: str
        source: dict[str, Any] | None
        description: str
        state: str
        status: str | None

    class Created(TurnlogAggregate.Created):
        TOPIC = "turnlog:DelegationStarted"
        handle: str
        session_id: str
        session_key: str  # the routing key it started on: its wake-up goes to that key's inbox
        owner_route_id: str  # not `route_id`: the stream is filed under its session (timeline.py)
        source: dict[str, Any] | None  # where the wake-up's reply goes back to
        description: str

        def apply(self, d: "Delegation") -> None:
            d.handle = self.handle
            d.session_id = self.session_id
            d.session_key = self.session_key
            d.route_id = self.owner_route_id
            d.source = self.source
            d.description = self.description
            d.state = RUNNING
            d.status = None

    class Stopped(TurnlogAggregate.Event):
        TOPIC = "turnlog:DelegationStopped"
        reason: str  # stop | session_reset

        def apply(self, d: "Delegation") -> None:
            d.state = STOPPED

    class Finished(TurnlogAggregate.Event):
        TOPIC = "turnlog:DelegationFinished"
        status: str
        summary: str
        wakeup_item: str  # the item its wake-up went into on the owning key's inbox

        def apply(self, d: "Delegation") -> None:
            d.state = FINISHED
            d.status = self.status

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    @property
    def finished(self) -> bool:
        return self.state == FINISHED

    def stop(self, reason: str, *, at: datetime, actor: str, cause: str) -> bool:
        """False when it is not running (stopped or finished already): stopping twice is one stop."""
        if not self.running:
            return False
        self.record(Delegation.Stopped, at=at, actor=actor, cause=cause, reason=reason)
        return True

    def finish(self, status: str, summary: str, wakeup_item: str, *, at: datetime, actor: str, cause: str) -> None:
        if status not in STATUSES:
            raise ValueError(f"unknown delegation status {status!r} (one of {', '.join(STATUSES)})")
        if self.finished:
            raise ValueError(f"delegation {self.handle} has finished already")
        self.record(Delegation.Finished, at=at, actor=actor, cause=cause, status=status, summary=summary,
                    wakeup_item=wakeup_item)
