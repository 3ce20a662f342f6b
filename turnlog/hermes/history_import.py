"""Hermes' history edits as the session's own events: rows rewound by /undo (`active=0,
compacted=0`) become TurnsUndone, rows archived by in-place compaction (`active=0, compacted=1`)
a TranscriptCompacted (HERMES_FORMATS §2.2).

Every such row is a transcript message, in id order like the live ones. Hermes compacts in place
by archiving every live row and inserting the compacted set (its summary, and the turns it kept,
copied) after them, so the compaction covers seq 1 .. the last archived row and its summary is
already in the transcript, after the range: the event holds none (Session.compact's
`summary_in_transcript`). What the agent sees is then exactly Hermes' live rows.
"""

from __future__ import annotations

from typing import Any

from ..domain.history import COMPACTED, UNDONE
from ..domain.session import Session


def row_fate(active: Any, compacted: Any) -> str | None:
    """A message row's fate by its flags: None (live), UNDONE or COMPACTED."""
    if active != 0:
        return None
    return COMPACTED if compacted == 1 else UNDONE


def edited_history(session: Session, fates: list[str | None], roles: list[str], repaired: list[dict[str, str]],
                   session_id: str, say: dict[str, Any]) -> None:
    """Record on `session` the edits that give its messages (`fates` and `roles` by seq - 1) their
    fates, in the order
    Hermes made them: an undo below the compaction came before it (a compaction archives live rows
    only), an undo above it after."""
    upto = max((seq for seq, fate in enumerate(fates, start=1) if fate == COMPACTED), default=0)
    runs = _undone_runs(fates)
    for first, last in runs:
        if last < upto:
            session.undo(first, last, roles[first - 1:last].count("user"), **say)
    if upto:
        live = [seq for seq in range(1, upto) if fates[seq - 1] is None]
        if live:
            # Hermes never leaves a live row among archived ones; a home that does is read as
            # the compaction says, and the rows are named.
            repaired.append({"what": f"messages {_seqs(live)} of session {session_id}",
                             "reason": "live rows among compacted ones: read as compacted"})
        session.compact(1, upto, [], focus=None, model=None, kept_turns=0, summary_in_transcript=True, **say)
    for first, last in runs:
        if first > upto:
            session.undo(first, last, roles[first - 1:last].count("user"), **say)


def _undone_runs(fates: list[str | None]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for seq, fate in enumerate(fates, start=1):
        if fate != UNDONE:
            continue
        if runs and runs[-1][1] == seq - 1:
            runs[-1] = (runs[-1][0], seq)
        else:
            runs.append((seq, seq))
    return runs


def _seqs(seqs: list[int]) -> str:
    shown = ", ".join(str(s) for s in seqs[:5])
    return shown + (f" (+{len(seqs) - 5})" if len(seqs) > 5 else "")
