"""Session: the lifecycle flags of one conversation, never its transcript.

State machine (each arrow is one event; docs/behaviour.md §3):

    created --touched--> created           (activity: the reset policy's clock)
    created --suspended--> suspended        (the next routed message gets a new session)
    created --resume_pending_marked--> resume_pending --resume_pending_cleared--> created
    * --ended(reason)--> ended --reopened--> created   (switch_session revives a target)

Edits of the agent's history (/undo, /retry, in-place compaction) are events of the session too,
kept in `edit_records` and read through `history_edits` (domain/history.py holds their rules).
    * --titled--> *                         (a title, in any state: domain/titles.py)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, TYPE_CHECKING
from uuid import UUID

from .base import TurnlogAggregate, stream_id
from .history import COMPACTED, RETRIED, UNDONE, HistoryEdit, HistoryEditError
from .policy import END_REASONS, FOREIGN_END_REASONS


class SessionStateError(ValueError):
    """A lifecycle command that the session's current state does not allow."""


class Session(TurnlogAggregate):
    TOPIC = "turnlog:Session"
    class_version = 2  # 2: edit_records

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["edit_records"] = []

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
        edit_records: list[dict[str, Any]]
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
            s.edit_records = []
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

    class TurnsUndone(TurnlogAggregate.Event):
        """/undo: messages from_seq .. upto_seq (the last `turns` user turns) left the agent's history."""

        TOPIC = "turnlog:TurnsUndone"
        from_seq: int
        upto_seq: int
        turns: int

        def apply(self, s: "Session") -> None:
            s._edited(UNDONE, self.from_seq, self.upto_seq, self.timestamp)

    class TurnRetried(TurnlogAggregate.Event):
        """/retry: the last turn (from its user message) left the agent's history; `text` runs again."""

        TOPIC = "turnlog:TurnRetried"
        from_seq: int
        upto_seq: int
        text: str

        def apply(self, s: "Session") -> None:
            s._edited(RETRIED, self.from_seq, self.upto_seq, self.timestamp)

    class TranscriptCompacted(TurnlogAggregate.Event):
        """In-place compaction: `summary` stands for messages from_seq .. upto_seq in the agent's
        history; the messages stay in the transcript (searchable, flagged). An empty `summary` is
        one whose summary is already in the transcript after the range (Hermes stores its summary
        as rows: an imported compaction)."""

        TOPIC = "turnlog:TranscriptCompacted"
        from_seq: int
        upto_seq: int
        summary: list[dict[str, Any]]
        focus: str | None
        model: str | None
        kept_turns: int

        def apply(self, s: "Session") -> None:
            s._edited(COMPACTED, self.from_seq, self.upto_seq, self.timestamp,
                      summary=self.summary, focus=self.focus, model=self.model)

    def _edited(self, kind: str, from_seq: int, upto_seq: int, at: datetime, **extra: Any) -> None:
        self.edit_records = [*self.edit_records, {"kind": kind, "from_seq": from_seq, "upto_seq": upto_seq,
                                                  "at": at, **extra}]

    @property
    def history_edits(self) -> tuple[HistoryEdit, ...]:
        return tuple(HistoryEdit(kind=r["kind"], from_seq=r["from_seq"], upto_seq=r["upto_seq"], at=r["at"],
                                 summary=tuple(r.get("summary") or ()), focus=r.get("focus"),
                                 model=r.get("model"))
                     for r in self.edit_records)
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

    def undo(self, from_seq: int, upto_seq: int, turns: int, *, at: datetime, actor: str, cause: str) -> None:
        _check_range(from_seq, upto_seq)
        self.record(Session.TurnsUndone, at=at, actor=actor, cause=cause, from_seq=from_seq, upto_seq=upto_seq,
                    turns=turns)

    def retry(self, from_seq: int, upto_seq: int, text: str, *, at: datetime, actor: str, cause: str) -> None:
        _check_range(from_seq, upto_seq)
        self.record(Session.TurnRetried, at=at, actor=actor, cause=cause, from_seq=from_seq, upto_seq=upto_seq,
                    text=text)

    def compact(self, from_seq: int, upto_seq: int, summary: list[dict[str, Any]], *, focus: str | None,
                model: str | None, kept_turns: int, at: datetime, actor: str, cause: str,
                summary_in_transcript: bool = False) -> None:
        """`summary_in_transcript`: the summary is the transcript's messages after the range, so
        `summary` is empty (an imported Hermes compaction)."""
        _check_range(from_seq, upto_seq)
        if bool(summary) == summary_in_transcript:
            raise HistoryEditError("a compaction's summary is in the transcript or in the event, not both"
                                   if summary else "a compaction needs a summary")
        self.record(Session.TranscriptCompacted, at=at, actor=actor, cause=cause, from_seq=from_seq,
                    upto_seq=upto_seq, summary=[dict(m) for m in summary], focus=focus, model=model,
                    kept_turns=kept_turns)

    def reopen(self, session_key: str, *, at: datetime, actor: str, cause: str) -> None:
        self.record(Session.Reopened, at=at, actor=actor, cause=cause, session_key=session_key)


# The topics of the edits of the agent's history, and the fate each gives the messages it covers:
# what a projection reads from the events themselves.
EDIT_FATES = {Session.TurnsUndone.TOPIC: UNDONE, Session.TurnRetried.TOPIC: RETRIED,
              Session.TranscriptCompacted.TOPIC: COMPACTED}


def session_stream(session_id: str) -> UUID:
    """The id of a session's aggregate (its stream in the log)."""
    return stream_id("session", session_id)


def edits_in(events: Iterable[Any]) -> tuple[HistoryEdit, ...]:
    """The edits of the agent's history among a session's events (read from its stream), in
    order, as its aggregate's `history_edits` gives them."""
    # The events' own apply, on a bare instance holding only edit_records: what an edit records
    # stays said in one place.
    session = Session.__new__(Session)
    session.edit_records = []
    for event in events:
        if isinstance(event, (Session.TurnsUndone, Session.TurnRetried, Session.TranscriptCompacted)):
            event.apply(session)
    return session.history_edits


def _check_range(from_seq: int, upto_seq: int) -> None:
    if not (isinstance(from_seq, int) and isinstance(upto_seq, int) and 1 <= from_seq <= upto_seq):
        raise HistoryEditError(f"not a message range: {from_seq!r}..{upto_seq!r}")


# The history edits, and the name a warm agent's eviction gives each.
_EDIT_REASONS: dict[type, str] = {Session.TurnsUndone: UNDONE, Session.TurnRetried: RETRIED,
                                  Session.TranscriptCompacted: COMPACTED}


def change_reason(event: Any) -> str | None:
    """Why a warm agent of the session this event belongs to should go (None: it may stay): the
    session ended (its reason: session_reset, compression, ...), was suspended, or its history
    was edited (undone, retried, compacted)."""
    if isinstance(event, Session.Ended):
        return event.reason
    if isinstance(event, Session.Suspended):
        return "suspended"
    return _EDIT_REASONS.get(type(event))
