"""In-place compaction: a summary stands for the head of a session's history (domain/history.py).

Planned from the agent's history, summarised by the gateway's summariser (or the deterministic
fallback), then recorded as one `TranscriptCompacted` on the session. Nothing is written before
the summary is in hand, so a summariser that raises, or a process killed while it thinks, leaves
nothing in the log.

Two ways to run one, both under the session's lease:
- `compact` (a /compress, an operator): refused while a turn holds the lease (or a cut-off turn
  still awaits recovery); the compaction commits in one transaction with an instant hold of the
  lease (acquired and released), and is refused if the lease moved while the summariser ran.
- `compact_under` (pre-turn hygiene): by the turn holding the lease, saved with its renewal.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Sequence, cast

from eventsourcing.persistence import IntegrityError

from ..clock import event_and_lease_time
from ..config import Summariser
from ..domain.compression import estimate_tokens
from ..domain.history import (HistoryEdit, HistoryEditError, fallback_summary, plan_compaction,
                              summary_messages)
from ..domain.lease import TurnLease
from ..domain.session import Session
from ..domain.transcript import MessageAppended
from ..errors import CompactionFailed, ConflictError, InvalidRequest, LeaseTimeout, NotFound, StaleLease
from ..projections.base import TypedRow
from .agent_history import read_agent_history
from .awaiting import resolved
from .context import CommandContext
from .lease import LeaseCommands, LeaseToken, lease_id

COMPACTED_OUTCOME = "compacted"  # how a compaction's instant hold of the lease ends
FAILURE_CHARS = 300


@dataclass(frozen=True)
class Compaction(TypedRow):
    """A recorded compaction: the range `from_seq`..`upto_seq` it covers, how many history
    entries the summary replaced (`messages_compacted`) and the history's length before and after,
    the summary's size, a rough token estimate of the history before and after, the turns kept
    verbatim, the focus and model, and its log position."""
    session_id: str
    from_seq: int
    upto_seq: int
    messages_compacted: int
    history_before: int
    history_after: int
    summary_messages: int
    summary_chars: int
    tokens_before: int  # rough estimates of the history's size (domain/compression.py estimate_tokens)
    tokens_after: int
    kept_turns: int
    focus: str | None
    model: str | None
    position: int


@dataclass(frozen=True)
class _Plan:
    history: list[MessageAppended]
    edits: tuple[HistoryEdit, ...]
    from_seq: int
    upto_seq: int
    replaced: list[MessageAppended]


def summarise(summariser: Summariser | None, replaced: Sequence[MessageAppended],
              focus: str | None) -> tuple[tuple[dict[str, Any], ...], str | None]:
    """The summary messages and the model that wrote them; CompactionFailed when the summariser
    raises or answers with something that is not a summary."""
    if summariser is None:
        return summary_messages(fallback_summary(replaced, focus)), None
    model = getattr(summariser, "model", None)
    try:
        value = resolved(summariser(list(replaced), focus))
    except Exception as failure:  # noqa: BLE001 - any failure of the gateway's summariser
        raise CompactionFailed(f"the summariser failed: {type(failure).__name__}: {failure}"[:FAILURE_CHARS]
                               ) from failure
    if isinstance(value, tuple) and len(value) == 2 and (value[1] is None or isinstance(value[1], str)):
        value, model = value
    try:
        return summary_messages(value), model if isinstance(model, str) else None
    except HistoryEditError as refused:
        raise CompactionFailed(f"the summariser's answer is not a summary: {refused}"[:FAILURE_CHARS]) from None


class CompactionCommands:
    def __init__(self, ctx: CommandContext, leases: LeaseCommands) -> None:
        self.ctx = ctx
        self.leases = leases

    def compact(self, session_id: str, owner_key: str, *, keep_turns: int = 0, focus: str | None = None,
                summary: Any = None, min_history: int = 1, actor: str, cause: str) -> Compaction:
        """Outside a turn. `summary` (text or messages) is recorded as given instead of asking the
        summariser; `min_history`: fewer history entries than this is nothing to compact."""
        ctx = self.ctx
        lease: TurnLease | None = ctx.get(lease_id(session_id), fresh=True)
        if lease is not None and lease.owner is not None:
            raise LeaseTimeout(f"a turn holds session {session_id}'s lease (or, cut off, awaits recovery):"
                               " compaction refused; try again when it has ended")
        seen = lease.version if lease is not None else None
        plan = self._plan(session_id, keep_turns, min_history)
        messages, model = self._summary(summary, plan, focus)

        def step() -> int:
            now, lease_now = event_and_lease_time(ctx.clock)
            held: TurnLease | None = ctx.get(lease_id(session_id), fresh=True)
            if (held.version if held is not None else None) != seen:
                raise LeaseTimeout(f"a turn began on session {session_id} while it was being summarised:"
                                   " nothing was compacted")
            session = self._session_as_planned(session_id, plan)
            if held is None:
                held = TurnLease.new(TurnLease.Created, id=lease_id(session_id), at=now, actor=actor, cause=cause,
                                     session_id=session_id)
            epoch = held.acquire(owner=self.leases.owner, owner_key=owner_key, generation=0,
                                 turn_id=f"compaction-{uuid.uuid4().hex}", ttl_s=ctx.config.lease_ttl_s, at=now,
                                 actor=actor, cause=cause, lease_now=lease_now)
            self._record(session, plan, messages, model, focus, keep_turns, actor, cause, now)
            held.release(epoch=epoch, outcome=COMPACTED_OUTCOME, at=now, actor=actor, cause=cause)
            return ctx.save(held, session)
        position = ctx.retrying(step, f"compaction of {session_id}")
        return self._result(session_id, plan, messages, model, focus, keep_turns, position)

    def compact_under(self, token: LeaseToken, *, keep_turns: int = 0, focus: str | None = None,
                      summary: Any = None, cause: str = "compaction") -> Compaction:
        """By the turn holding `token` (hygiene before the agent runs); StaleLease once it moved on."""
        self._still_held(token)  # from the log: no summary is asked for under a lease already lost
        session_id = token.session_id
        plan = self._plan(session_id, keep_turns, 1)
        messages, model = self._summary(summary, plan, focus)
        actor = self.leases.owner
        with self.leases.write_lock(token):
            for _ in range(3):
                lease = self.leases.held(token)
                session = self._session_as_planned(session_id, plan)
                now, lease_now = event_and_lease_time(self.ctx.clock)
                lease.renew(epoch=token.epoch, ttl_s=self.ctx.config.lease_ttl_s, last_seq=lease.last_seq, at=now,
                            actor=actor, cause=cause, lease_now=lease_now)
                self._record(session, plan, messages, model, focus, keep_turns, actor, cause, now)
                try:
                    position = self.ctx.save(lease, session)
                    return self._result(session_id, plan, messages, model, focus, keep_turns, position)
                except IntegrityError:
                    self._still_held(token)  # the session moved (a message routed meanwhile): again
        raise ConflictError(f"compaction of {session_id}: lost 3 concurrent-update races in a row")

    def _still_held(self, token: LeaseToken) -> None:
        fresh: TurnLease | None = self.ctx.get(lease_id(token.session_id), fresh=True)
        if fresh is None or fresh.epoch != token.epoch or fresh.owner != token.owner:
            self.leases.forget(token)
            raise StaleLease(f"lease epoch {token.epoch} of session {token.session_id} was taken over, revoked"
                             " or moved; nothing was compacted")
        self.leases.adopt(token, fresh)

    def _plan(self, session_id: str, keep_turns: int, min_history: int) -> _Plan:
        if not isinstance(keep_turns, int) or isinstance(keep_turns, bool) or keep_turns < 0:
            raise InvalidRequest(f"the number of turns to keep must be a non-negative integer, got {keep_turns!r}")
        session = self.ctx.session(session_id)
        if session is None:
            raise NotFound(f"no session {session_id!r}")
        history = read_agent_history(self.ctx, session_id, session)
        if len(history) < min_history:
            raise CompactionFailed(f"not enough conversation to compress (need at least {min_history} messages)",
                                   nothing_to_do=True)
        try:
            from_seq, upto_seq, replaced = plan_compaction(history, session.history_edits, keep_turns=keep_turns)
        except HistoryEditError as nothing:
            raise CompactionFailed(str(nothing), nothing_to_do=True) from None
        # plan_compaction returns entries of `history` itself
        return _Plan(history, session.history_edits, from_seq, upto_seq, cast(list[MessageAppended], replaced))

    def _summary(self, given: Any, plan: _Plan, focus: str | None) -> tuple[tuple[dict[str, Any], ...], str | None]:
        if given is None:
            return summarise(self.ctx.config.summariser, plan.replaced, focus)
        try:
            return summary_messages(given), None
        except HistoryEditError as refused:
            raise InvalidRequest(str(refused)) from None

    def _session_as_planned(self, session_id: str, plan: _Plan) -> Session:
        session: Session | None = self.ctx.session(session_id)
        if session is None or session.history_edits != plan.edits:
            raise ConflictError(f"the history of session {session_id} was edited while it was being summarised:"
                                " nothing was compacted")
        return session

    @staticmethod
    def _record(session: Session, plan: _Plan, messages: tuple[dict[str, Any], ...], model: str | None,
                focus: str | None, keep_turns: int, actor: str, cause: str, now: Any) -> None:
        session.compact(plan.from_seq, plan.upto_seq, list(messages), focus=focus, model=model,
                        kept_turns=keep_turns, at=now, actor=actor, cause=cause)

    @staticmethod
    def _result(session_id: str, plan: _Plan, messages: tuple[dict[str, Any], ...], model: str | None,
                focus: str | None, keep_turns: int, position: int) -> Compaction:
        kept = plan.history[len(plan.replaced):]
        tokens_before = estimate_tokens(m.content for m in plan.history)
        tokens_after = estimate_tokens([*(m["content"] for m in messages), *(m.content for m in kept)])
        return Compaction(session_id, plan.from_seq, plan.upto_seq, len(plan.replaced), len(plan.history),
                          len(kept) + len(messages), len(messages), sum(len(m["content"]) for m in messages),
                          tokens_before, tokens_after, keep_turns, focus, model, position)
