"""Recording the answers of tool calls a turn was cut off in (the rule: domain/tool_answers.py).

Two writers: recovery, for the turn a crash interrupted (actor system:recovery, saved with the
lease's revocation, so before any resume); and a turn starting on a transcript whose last turn
did not complete (a Hermes import, a fork, a turn that failed, was stopped or lost its lease),
before its own first message (actor the boot). Either way the answers are ordinary tool messages
of the transcript (MessageAppended, finish_reason "interrupted"), so every reader — the agent's
history, `show`, search, export, time travel — sees what the log says.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Sequence

from ..clock import lease_time
from ..domain.lease import TurnLease
from ..domain.tool_answers import unanswered_at_end
from ..domain.transcript import MessageAppended, read_transcript, transcript_id

if TYPE_CHECKING:
    from .lease import LeaseCommands, LeaseToken

TAIL_READ = 64  # messages read back from the end: more tool calls than one assistant message makes


def answer_events(messages: Sequence[MessageAppended], *, session_id: str, first_seq: int, epoch: int,
                  turn_id: str, cut_off_by: str | None, at: datetime, actor: str,
                  cause: str) -> list[MessageAppended]:
    """A tool message at first_seq, first_seq+1, ... for each call the messages end unanswered with."""
    return [MessageAppended(originator_id=transcript_id(session_id), originator_version=seq, timestamp=at,
                            session_id=session_id, tool_calls=None, token_count=None, platform_message_id=None,
                            **call.answer(cut_off_by), epoch=epoch, turn_id=turn_id, actor=actor, cause=cause)
            for seq, call in enumerate(unanswered_at_end(messages), start=first_seq)]


def answers_before_turn(turns: "LeaseCommands", lease: TurnLease, token: "LeaseToken", *,
                        cause: str) -> list[MessageAppended]:
    """Answers for a transcript that ends with unanswered calls, saved with the starting turn's
    acquisition (pending on `lease`, which reserved the seq after the transcript). They take the
    reserved seq onwards and a renewal moves the reservation past them, so the turn's first
    message (at lease.last_seq) follows them. Only read when the turn before did not complete:
    a completed turn ends with its answer."""
    previous_end = getattr(lease, "previous_end", None)  # older snapshots lack it: look
    if previous_end == "completed" or lease.last_seq <= 1:
        return []
    before = read_transcript(turns.ctx.app.events.get, token.session_id, upto=lease.last_seq - 1,
                             newest_first=True, limit=TAIL_READ)
    now = turns.ctx.clock.now()
    answers = answer_events(list(reversed(before)), session_id=token.session_id, first_seq=lease.last_seq,
                            epoch=token.epoch, turn_id=token.turn_id, cut_off_by=previous_end, at=now,
                            actor=turns.owner, cause=cause)
    if answers:
        lease.renew(epoch=token.epoch, ttl_s=turns.ctx.config.lease_ttl_s, last_seq=lease.last_seq + len(answers),
                    at=now, actor=turns.owner, cause=cause, lease_now=lease_time(turns.ctx.clock))
    return answers
