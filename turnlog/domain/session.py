"""Session: the lifecycle flags of one conversation, never its transcript.

State machine (each arrow is one event; docs/behaviour.md §3):

    created --touched--> created           (activity: the reset policy's clock)
    created --suspended--> suspended        (the next routed message gets a new session)
    created --resume_pending_marked--> resume_pending --resume_pending_cleared--> created
    * --ended(reason)--> ended --reopened--> created   (switch_session revives a target)
    * --titled--> *                         (a title, in any state: domain/titles.py)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TYPE_CHECKING

from .base import TurnlogAggregate
from .policy import END_REASONS, FOREIGN_END_REASONS


class SessionStateError(ValueError):
    """A lifecycle command that the session's current state does not allow."""


class Session(TurnlogAggregate):
    TOPIC = "turnlog:Session"

    if TYPE_CHECKING:  # state set by the events' apply methods
        session_id: str
        session_key: str
        origin: dict[str, Any] | None
        created_reason: str
        parent_session_id: str | None
        children: list[str]
        last_activity: datetime
        suspended: bool
        suspend_reason: str | None
        resume_pending: bool
        resume_reason: str | None
        resume_marked_at: datetime | None
        ended: bool
        end_reason: str | None
        title: str | None

    class Created(TurnlogAggregate.Created):
        TOPIC = "turnlog:SessionCreated"
        session_id: str
        session_key: str
        origin: dict[str, Any] | None
        reason: str
        previous_session_id: str | None
        parent_session_id: str | None

        def apply(self, s: "Session") -> None:
            s.session_id = self.session_id
            s.session_key = self.session_key
            s.origin = self.origin
            s.created_reason = self.reason
            s.parent_session_id = self.parent_session_id
            s._live(self.session_key, self.timestamp)

    class ActivityTouched(TurnlogAggregate.Event):
        TOPIC = "turnlog:ActivityTouched"
        session_key: str

        def apply(self, s: "Session") -> None:
            s.last_activity = self.timestamp

    class Suspended(TurnlogAggregate.Event):
        TOPIC = "turnlog:SessionSuspended"
        reason: str

        def apply(self, s: "Session") -> None:
            s.suspended = True
            s.suspend_reason = self.reason

    class ResumePendingMarked(TurnlogAggregate.Event):
        TOPIC = "turnlog:ResumePendingMarked"
        reason: str

        def apply(self, s: "Session") -> None:
            s.resume_pending = True
            s.resume_reason = self.reason
            s.resume_marked_at = self.timestamp

    class ResumePendingCleared(TurnlogAggregate.Event):
        TOPIC = "turnlog:ResumePendingCleared"

        def apply(self, s: "Session") -> None:
            s.resume_pending = False
            s.resume_reason = None
            s.resume_marked_at = None

    class ScopeCleared(TurnlogAggregate.Event):
        """Conversation-scoped state dropped and async children interrupted (/new, /reset)."""

        TOPIC = "turnlog:ConversationScopeCleared"
        interrupted_children: list[str]

        def apply(self, s: "Session") -> None:
            s.children = []

    class ChildStarted(TurnlogAggregate.Event):
        TOPIC = "turnlog:ChildStarted"
        child_id: str

        def apply(self, s: "Session") -> None:
            s.children = [*getattr(s, "children", []), self.child_id]

    class ChildFinished(TurnlogAggregate.Event):
        TOPIC = "turnlog:ChildFinished"
        child_id: str

        def apply(self, s: "Session") -> None:
            s.children = [c for c in getattr(s, "children", []) if c != self.child_id]

    class Ended(TurnlogAggregate.Event):
        TOPIC = "turnlog:SessionEnded"
        reason: str

        def apply(self, s: "Session") -> None:
            s.ended = True
            s.end_reason = self.reason

    class Reopened(TurnlogAggregate.Event):
        TOPIC = "turnlog:SessionReopened"
        session_key: str

        def apply(self, s: "Session") -> None:
            s._live(self.session_key, self.timestamp)

    class Titled(TurnlogAggregate.Event):
        """The session's title set (None: cleared); `previous_title` is the one it replaced."""

        TOPIC = "turnlog:SessionTitled"
        title: str | None
        previous_title: str | None

        def apply(self, s: "Session") -> None:
            s.title = self.title

    def _live(self, session_key: str, at: datetime) -> None:
        """A new or reopened session: routed under this key, every lifecycle flag cleared."""
        self.session_key = session_key
        self.last_activity = at
        self.suspended = False
        self.suspend_reason = None
        self.resume_pending = False
        self.resume_reason = None
        self.resume_marked_at = None
        self.ended = False
        self.end_reason = None
        self.children = []

    @property
    def current_title(self) -> str | None:
        return getattr(self, "title", None)  # sessions recorded before titles existed have none

    def retitle(self, title: str | None, *, at: datetime, actor: str, cause: str) -> bool:
        """False when the session already has this title (nothing recorded)."""
        if title == self.current_title:
            return False
        self.record(Session.Titled, at=at, actor=actor, cause=cause, title=title, previous_title=self.current_title)
        return True

    def touch(self, session_key: str, *, at: datetime, actor: str, cause: str) -> None:
        self.record(Session.ActivityTouched, at=at, actor=actor, cause=cause, session_key=session_key)

    def suspend(self, reason: str, *, at: datetime, actor: str, cause: str) -> bool:
        if self.suspended or self.ended:
            return False
        self.record(Session.Suspended, at=at, actor=actor, cause=cause, reason=reason)
        return True

    def mark_resume_pending(self, reason: str, *, at: datetime, actor: str, cause: str) -> bool:
        """Refused (False) while suspended or ended: a suspended session is never auto-resumed."""
        if self.suspended or self.ended:
            return False
        self.record(Session.ResumePendingMarked, at=at, actor=actor, cause=cause, reason=reason)
        return True

    def clear_resume_pending(self, *, at: datetime, actor: str, cause: str) -> bool:
        if not self.resume_pending:
            return False
        self.record(Session.ResumePendingCleared, at=at, actor=actor, cause=cause)
        return True

    def clear_scope(self, *, at: datetime, actor: str, cause: str) -> None:
        self.record(Session.ScopeCleared, at=at, actor=actor, cause=cause,
                    interrupted_children=list(getattr(self, "children", [])))

    def start_child(self, child_id: str, *, at: datetime, actor: str, cause: str) -> None:
        self.record(Session.ChildStarted, at=at, actor=actor, cause=cause, child_id=child_id)

    def finish_child(self, child_id: str, *, at: datetime, actor: str, cause: str) -> bool:
        if child_id not in getattr(self, "children", []):
            return False
        self.record(Session.ChildFinished, at=at, actor=actor, cause=cause, child_id=child_id)
        return True

    def end(self, reason: str, *, at: datetime, actor: str, cause: str) -> None:
        if reason not in END_REASONS and reason not in FOREIGN_END_REASONS:
            raise SessionStateError(f"unknown end reason {reason!r}")
        if not self.ended:
            self.record(Session.Ended, at=at, actor=actor, cause=cause, reason=reason)

    def reopen(self, session_key: str, *, at: datetime, actor: str, cause: str) -> None:
        self.record(Session.Reopened, at=at, actor=actor, cause=cause, session_key=session_key)
