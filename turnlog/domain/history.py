"""The agent's history: the transcript as edited by /undo, /retry and in-place compaction.

Nothing is ever removed from a transcript. An edit is an event on the session that marks a range
of message sequence numbers: undone (/undo), retried (/retry: the last turn runs again, so the old
one leaves the history) or compacted (a summary stands for the range). The history handed to the
agent is the transcript with undone and retried messages left out and each standing compaction's
range replaced by its summary; every other reader (search, show, the viewer, time travel) asks
`fate_of` what became of a message and shows it flagged.

A compaction always starts at the head of what the agent saw, so a later one covers every earlier
one: only the last compaction stands, and the agent's history never needs a message at or below
its `upto_seq` (`history_floor`). Undo and retry never reach into a compacted range: the summary
stands for it and is not a turn. A compaction imported from Hermes has no summary of its own:
Hermes wrote its summary as messages after the range, so they are in the transcript already.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, TypeVar

UNDONE = "undone"
RETRIED = "retried"
COMPACTED = "compacted"
FATES = (UNDONE, RETRIED, COMPACTED)  # a message with no fate is active
ECHO_CHARS = 200  # how much of each backed-up user message /undo echoes


class HistoryEditError(ValueError):
    """An edit that the transcript does not allow (nothing to undo, a range out of bounds)."""


@dataclass(frozen=True)
class HistoryEdit:
    kind: str  # one of FATES
    from_seq: int
    upto_seq: int  # inclusive
    at: Any  # the edit's time (a datetime)
    summary: tuple[dict[str, Any], ...] = ()  # compaction only: messages ({"role", "content"}) for the range
    focus: str | None = None
    model: str | None = None

    def covers(self, seq: int) -> bool:
        return self.from_seq <= seq <= self.upto_seq


class Message(Protocol):
    @property
    def originator_version(self) -> Any: ...
    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...


M = TypeVar("M", bound=Message)


def standing_compaction(edits: Sequence[HistoryEdit]) -> HistoryEdit | None:
    return next((e for e in reversed(edits) if e.kind == COMPACTED), None)


def history_floor(edits: Sequence[HistoryEdit]) -> int:
    """The agent's history holds no message at or below this sequence number."""
    standing = standing_compaction(edits)
    return standing.upto_seq if standing is not None else 0


HIDDEN = (UNDONE, RETRIED)  # fates that keep a message out of default reads; once set, they stay


def fate_of(seq: int, edits: Sequence[HistoryEdit]) -> str | None:
    """What became of message `seq`: None (active), UNDONE, RETRIED or COMPACTED. An undone
    message that a later compaction covered stays undone: it was never summarised."""
    fate = None
    for edit in edits:
        if edit.covers(seq) and fate not in HIDDEN:
            fate = edit.kind
    return fate


def with_fates(rows: Sequence[dict[str, Any]], edits: Sequence[HistoryEdit]) -> list[dict[str, Any]]:
    """Transcript rows (dicts with a "seq") each with its "fate" (fate_of)."""
    return [{**row, "fate": fate_of(int(row["seq"]), edits)} for row in rows]


def agent_history(messages: Sequence[M], edits: Sequence[HistoryEdit],
                  summary_message: Callable[[HistoryEdit, int, dict[str, Any]], M]) -> list[M]:
    """What the agent sees: `messages` (in sequence order; those at or below `history_floor` may
    be left out) minus the undone, retried and compacted ones, with the standing compaction's
    summary in place of its range. `summary_message(edit, index, message)` makes a summary entry."""
    hidden = [e for e in edits if e.kind in HIDDEN]
    standing = standing_compaction(edits)
    history: list[M] = []
    if standing is not None:
        history += [summary_message(standing, i, m) for i, m in enumerate(standing.summary)]
    floor = standing.upto_seq if standing is not None else 0
    for message in messages:
        seq = int(message.originator_version)
        if seq <= floor or any(e.covers(seq) for e in hidden):
            continue
        history.append(message)
    return history


def history_length(last_seq: int, edits: Sequence[HistoryEdit]) -> int:
    """How many entries `agent_history` gives for a transcript of `last_seq` messages, counted
    from the edits alone (no message read): what hygiene weighs, not the transcript's size."""
    hidden = [e for e in edits if e.kind in (UNDONE, RETRIED)]
    standing = standing_compaction(edits)
    floor = standing.upto_seq if standing is not None else 0
    count = len(standing.summary) if standing is not None else 0
    return count + sum(1 for seq in range(floor + 1, last_seq + 1) if not any(e.covers(seq) for e in hidden))


@dataclass(frozen=True)
class UndoPlan:
    from_seq: int
    upto_seq: int
    turns: int  # how many user turns, after clamping to the oldest one there is
    echoed: tuple[str, ...] = field(default=())  # the backed-up user messages, oldest first, cut to ECHO_CHARS


def _user_turns(history: Sequence[Message], floor: int) -> list[Message]:
    return [m for m in history if m.role == "user" and int(m.originator_version) > floor]


def plan_undo(history: Sequence[Message], edits: Sequence[HistoryEdit], last_seq: int, turns: int) -> UndoPlan:
    """Back up `turns` user turns of the agent's history (clamped to the oldest one after the
    standing compaction); HistoryEditError when there is none."""
    if not isinstance(turns, int) or isinstance(turns, bool) or turns < 1:
        raise HistoryEditError(f"the number of turns to undo must be a positive integer, got {turns!r}")
    users = _user_turns(history, history_floor(edits))
    if not users:
        raise HistoryEditError("nothing to undo")
    backed = users[-turns:]
    return UndoPlan(int(backed[0].originator_version), last_seq, len(backed),
                    tuple(m.content[:ECHO_CHARS] for m in backed))


def plan_retry(history: Sequence[Message], edits: Sequence[HistoryEdit], last_seq: int) -> tuple[UndoPlan, str]:
    """The last user turn leaves the history, and its text (whole) runs again as a new turn."""
    users = _user_turns(history, history_floor(edits))
    if not users:
        raise HistoryEditError("nothing to retry")
    last = users[-1]
    return UndoPlan(int(last.originator_version), last_seq, 1, (last.content[:ECHO_CHARS],)), last.content


def plan_compaction(history: Sequence[Message], edits: Sequence[HistoryEdit], *, keep_turns: int = 0,
                    min_messages: int = 1) -> tuple[int, int, list[Message]]:
    """(from_seq, upto_seq, the history entries the summary replaces) for a compaction keeping the
    last `keep_turns` user turns verbatim. The range starts at the head of the history (so an
    earlier summary is summarised again) and ends before the first kept turn."""
    if not isinstance(keep_turns, int) or isinstance(keep_turns, bool) or keep_turns < 0:
        raise HistoryEditError(f"the number of turns to keep must be a non-negative integer, got {keep_turns!r}")
    floor = history_floor(edits)
    fresh = [m for m in history if int(m.originator_version) > floor]
    if keep_turns:
        users = _user_turns(fresh, floor)
        if len(users) <= keep_turns:
            raise HistoryEditError(f"nothing to compact: the history holds {len(users)} turn(s), "
                                   f"{keep_turns} to keep")
        first_kept = int(users[-keep_turns].originator_version)
        fresh = [m for m in fresh if int(m.originator_version) < first_kept]
    if len(fresh) < min_messages or not fresh:
        raise HistoryEditError(f"nothing to compact: {len(fresh)} message(s) to summarise")
    replaced = [m for m in history if int(m.originator_version) <= int(fresh[-1].originator_version)]
    return 1, int(fresh[-1].originator_version), replaced


def fallback_summary(replaced: Sequence[Message], focus: str | None = None) -> list[dict[str, Any]]:
    """A deterministic summary for when no summariser is configured: the user's requests and the
    last answer, cut short, marked as reference only (the way Hermes marks its summaries)."""
    asks = [m.content.strip()[:ECHO_CHARS] for m in replaced if m.role == "user" and m.content.strip()]
    answers = [m.content.strip()[:ECHO_CHARS] for m in replaced if m.role == "assistant" and m.content.strip()]
    lines = ["[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted "
             f"({len(replaced)} messages)."]
    if focus:
        lines.append(f"Focus: {focus}")
    lines += [f"- asked: {a}" for a in asks[-20:]]
    if answers:
        lines.append(f"Last answer: {answers[-1]}")
    lines.append("--- END OF CONTEXT SUMMARY — respond to the message below, not the summary above ---")
    return [{"role": "user", "content": "\n".join(lines)}]


def summary_messages(value: Any) -> tuple[dict[str, Any], ...]:
    """A summariser's answer as summary messages: a string, or a list of {"role", "content"}."""
    if isinstance(value, str):
        if not value.strip():
            raise HistoryEditError("a summary must not be empty")
        value = [{"role": "user", "content": value}]
    if not isinstance(value, (list, tuple)) or not value:
        raise HistoryEditError("a summary must be a non-empty string or list of messages")
    messages = []
    for m in value:
        if not (isinstance(m, dict) and isinstance(m.get("content"), str) and m["content"].strip()
                and m.get("role", "user") in ("user", "assistant", "system")):
            raise HistoryEditError(f"a summary message must be {{'role': user|assistant|system, "
                                   f"'content': str}}, got {m!r}"[:200])
        messages.append({"role": m.get("role", "user"), "content": m["content"]})
    return tuple(messages)
