"""Pure recovery rules (docs/behaviour.md §6, §7; seed 002 §7): what to do with a turn a crash interrupted,
and which in-flight inbound items a finished turn completes. No I/O: the callers
(commands/recovery.py, commands/turn.py) read the facts and save what these decide."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol

STUCK_LOOP_LIMIT = 3  # the third interrupted turn in a row suspends the session

# The actions, as recovery reports them.
REDELIVER = "redeliver"  # the reply is persisted and owed: the ledger sweep redelivers it
UNOWNED_ROW = "unowned_row"  # a persisted reply without a ledger row: one is recorded, unsure of a send
NOTHING_OWED = "nothing_owed"  # a persisted reply that owes nothing (silence on an internal turn)
DROPPED = "dropped"  # no reply and the session is gone or ended: its in-flight items close
SUSPENDED_STUCK_LOOP = "suspended_stuck_loop"  # no reply, third time in a row: suspend, close items
RESUME_PENDING = "resume_pending"  # no reply: mark the session to be resumed once


@dataclass(frozen=True)
class InterruptedFacts:
    """What the log says about one interrupted turn."""
    has_reply: bool  # the turn's assistant message was persisted
    delivery_recorded: bool  # ... with its ledger row
    reply_owes_outbound: bool  # ... and it is something to send (not silence on an internal turn)
    session_open: bool  # the session exists and has not ended
    session_suspended: bool
    interrupted_before: int  # interrupted turns in a row before this one (the lease counts them)


def decide_interrupted_turn(facts: InterruptedFacts) -> str:
    """The one action for an interrupted turn."""
    if facts.has_reply:
        if facts.delivery_recorded:
            return REDELIVER
        return UNOWNED_ROW if facts.reply_owes_outbound else NOTHING_OWED
    if not facts.session_open:
        return DROPPED
    if facts.interrupted_before + 1 >= STUCK_LOOP_LIMIT or facts.session_suspended:
        return SUSPENDED_STUCK_LOOP
    return RESUME_PENDING


def finishes_the_turn(action: str) -> bool:
    """Whether the turn ends with recovery (its reply stands) rather than waiting to be resumed."""
    return action in (REDELIVER, UNOWNED_ROW, NOTHING_OWED)


def closes_in_flight_items(action: str) -> bool:
    """Whether every item still in flight on the session is closed (with the action as outcome)."""
    return action in (DROPPED, SUSPENDED_STUCK_LOOP)


class _InFlight(Protocol):
    @property
    def item_id(self) -> str: ...

    @property
    def session_id(self) -> str | None: ...


def answered_items(in_flight: Iterable[_InFlight], item_id: str | None, session_id: str,
                   closes_cut_off: bool) -> list[tuple[str, str]]:
    """The one completion rule of a turn that got its reply: (item id, outcome) to complete.

    The item the turn answered is `answered`. With `closes_cut_off` — the turn ended an
    interruption (its session was resume_pending), or it completed holding the session's lease
    while an earlier turn's item is still in flight there (that turn was cut off: its lease was
    taken over after a stall) — every other item in flight on the session was answered by it too
    (`answered_by_later_turn`): a cut-off or interrupted turn's item is never left started.
    """
    done = []
    for waiting in in_flight:
        if item_id is not None and waiting.item_id == item_id:
            done.append((waiting.item_id, "answered"))
        elif closes_cut_off and waiting.session_id == session_id:
            done.append((waiting.item_id, "answered_by_later_turn"))
    return done
