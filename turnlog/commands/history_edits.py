"""Edits of a session's agent history (/undo, /retry, in-place compaction), made under its lease.

An edit takes the session's turn lease as a turn does, but never waits for it: while a turn runs
the edit is refused (SessionBusy), as Hermes refuses /undo mid-turn, instead of changing the
history under the agent that is reading it. `under_lease` is the one step every edit goes
through: the lease's acquisition, the edit's events and the lease's release commit in one
transaction, so a turn that starts meanwhile makes the save conflict (then the retry finds the
lease held), and a crash leaves either all of the edit or nothing. A compaction, whose summary
is slow work done before anything is held, takes the same instant hold in commands/compaction.py.
The rules of what an edit covers are domain/history.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, TypeVar

from ..domain.history import HistoryEditError, plan_retry, plan_undo
from ..domain.lease import LeaseHeld
from ..domain.session import Session
from ..domain.transcript import MessageAppended
from ..errors import InvalidRequest, NotFound, SessionBusy
from .agent_history import read_agent_history
from .context import CommandContext
from .lease import LeaseCommands

T = TypeVar("T")
EDITED = "edited"  # how the lease's holding by an edit ended (its release outcome)


@dataclass(frozen=True)
class Editing:
    """What an edit decides from, read under the lease: the session (record the edit on it), the
    agent's history as of now, the transcript's last seq and the edit's time."""

    session: Session
    history: list[MessageAppended]
    last_seq: int
    at: datetime


# Decides the edit: its result, and other aggregates to save with the session (none: []). May be
# called more than once (another write conflicted): keep slow work out of it, or do it once.
EditStep = Callable[[Editing], "tuple[T, list[Any]]"]


@dataclass(frozen=True)
class UndoResult:
    """What /undo (or `Turnlog.undo`) did: `turns` user turns (0: nothing to undo) backed up,
    messages `from_seq`..`upto_seq` of `session_id` out of the agent's history (still in the
    log), `messages` of them in that history; `echoed`: the backed-up user messages, oldest first,
    each cut to 200 characters."""

    session_id: str
    turns: int
    from_seq: int | None = None
    upto_seq: int | None = None
    messages: int = 0
    echoed: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "echoed": list(self.echoed)}


class HistoryEdits:
    def __init__(self, ctx: CommandContext, leases: LeaseCommands) -> None:
        self.ctx = ctx
        self.leases = leases

    def under_lease(self, session_id: str, step: EditStep[T], *, actor: str, cause: str) -> T:
        """Run `step` under the session's lease and save what it recorded; SessionBusy while a
        turn holds the lease, NotFound for no such session. Nothing is saved when the step
        recorded nothing (nothing to undo)."""
        def attempt() -> T:
            session = self._session(session_id)
            try:
                lease, token = self.leases.acquiring(session_id, session.session_key, actor=actor, cause=cause,
                                                     fresh=True)
            except LeaseHeld as held:
                raise _busy(session_id, held) from None
            editing = self._editing(session, lease.last_seq)
            result, items = step(editing)
            if not editing.session.pending_events and not items:
                return result  # nothing changed: the acquisition is not saved either
            lease.release(epoch=token.epoch, outcome=EDITED, at=editing.at, actor=actor, cause=cause)
            self.ctx.save(lease, editing.session, *items)
            return result
        return self.ctx.retrying(attempt, f"an edit of session {session_id}")

    def _session(self, session_id: str) -> Session:
        session = self.ctx.session(session_id)
        if session is None:
            raise NotFound(f"no session {session_id!r}")
        return session

    def _editing(self, session: Session, last_seq: int) -> Editing:
        return Editing(session, read_agent_history(self.ctx, session.session_id, session), last_seq,
                       self.ctx.clock.now())

    # -- the edits ----------------------------------------------------------------------------

    def undo(self, session_id: str, turns: int = 1, *, actor: str, cause: str) -> UndoResult:
        """Back up `turns` user turns (clamped to the oldest there is); turns=0 in the result when
        there was nothing to undo. InvalidRequest for a count that is not a positive integer."""
        if not isinstance(turns, int) or isinstance(turns, bool) or turns < 1:
            raise InvalidRequest(f"the number of turns to undo must be a positive integer, got {turns!r}")

        def step(editing: Editing) -> tuple[UndoResult, list[Any]]:
            try:
                plan = plan_undo(editing.history, editing.session.history_edits, editing.last_seq, turns)
            except HistoryEditError:
                return UndoResult(session_id, 0), []
            editing.session.undo(plan.from_seq, plan.upto_seq, plan.turns, at=editing.at, actor=actor, cause=cause)
            hidden = sum(1 for m in editing.history if int(m.originator_version) >= plan.from_seq)
            return UndoResult(session_id, plan.turns, plan.from_seq, plan.upto_seq, hidden, plan.echoed), []
        return self.under_lease(session_id, step, actor=actor, cause=cause)

    def retry(self, session_id: str, also: Callable[[Editing, str], list[Any]], *, actor: str,
              cause: str) -> str | None:
        """The last user turn leaves the agent's history; `also(editing, text)` gives what runs
        the text again (saved in the same transaction). Returns the text, None when there was
        no user turn to retry."""
        def step(editing: Editing) -> tuple[str | None, list[Any]]:
            try:
                plan, text = plan_retry(editing.history, editing.session.history_edits, editing.last_seq)
            except HistoryEditError:
                return None, []
            editing.session.retry(plan.from_seq, plan.upto_seq, text, at=editing.at, actor=actor, cause=cause)
            return text, also(editing, text)
        return self.under_lease(session_id, step, actor=actor, cause=cause)


def _busy(session_id: str, held: LeaseHeld) -> SessionBusy:
    return SessionBusy(f"a turn is running on session {session_id} ({held}): the edit was refused")
