"""A session's Hermes message rows as the history edits left them, for an export.

Hermes reads a transcript as its `active` rows in id order (HERMES_FORMATS §2.2): an undone or
retried message is written `active=0, compacted=0`, a compacted one `active=0, compacted=1`; a
compaction made in turnlog (its summary in the event) gets its summary rows right after its
range, live when it stands, archived when a later one covers it. Hermes itself copies the kept
tail after the summary; here the tail's rows simply come after it (new ids when their own would
break the order). `message_count` is what Hermes would hold: it counts every appended row, is
not lowered by /undo, and is set to the live set's size by a compaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..domain.history import COMPACTED, RETRIED, UNDONE, HistoryEdit, fate_of, standing_compaction

FLAGS = {None: None, UNDONE: (0, 0), RETRIED: (0, 0), COMPACTED: (0, 1)}  # fate -> (active, compacted)


@dataclass
class Row:
    """One row to write: `seq` for a transcript message (its event is `message`), else a kept row
    (a marker, an old import's inactive row) or a summary row in `fields`. `wanted` is the id to
    keep, if it keeps the order."""

    fields: dict[str, Any]
    wanted: int | None
    seq: int | None = None
    message: Any = None
    summary_of: HistoryEdit | None = None


def layout(messages: Sequence[Any], ids: Sequence[int], kept: Sequence[dict[str, Any]],
           edits: Sequence[HistoryEdit]) -> list[Row]:
    """The rows of one session in id order: `messages` (seq order, the first len(ids) at those
    Hermes ids), the `kept` rows (with their ids) where their ids put them, and the summary rows
    of each compaction whose summary the event holds."""
    pending = sorted(kept, key=lambda r: r["id"])
    summaries = {e.upto_seq: e for e in edits if e.kind == COMPACTED and e.summary}
    standing = standing_compaction(edits)
    rows: list[Row] = []
    for seq, m in enumerate(messages, start=1):
        wanted = ids[seq - 1] if seq <= len(ids) else None
        while pending and (wanted is None or pending[0]["id"] < wanted):
            row = pending.pop(0)
            rows.append(Row(row, row["id"]))
        if seq - 1 in summaries:
            rows += _summary_rows(summaries[seq - 1], standing)
        rows.append(Row({}, wanted, seq, m))
    rows += [Row(row, row["id"]) for row in pending]
    if len(messages) in summaries:
        rows += _summary_rows(summaries[len(messages)], standing)
    if standing is not None and standing.summary:
        _archive_kept_rows_before(rows, standing)
    return rows


def flags(seq: int, edits: Sequence[HistoryEdit]) -> tuple[int, int] | None:
    """(active, compacted) of message `seq` by its fate; None when live (the row's own flags stand)."""
    return FLAGS[fate_of(seq, edits)]


def counts(messages: Sequence[Any], edits: Sequence[HistoryEdit], imported: int | None,
           base: tuple[int, int]) -> tuple[int, int]:
    """(message_count, tool_call_count) as Hermes keeps them. `imported`: how many messages came
    from Hermes with `base`, its counts then (None: a session born in turnlog)."""
    standing = standing_compaction(edits)
    if standing is not None and standing.summary:
        # made in turnlog: the live set at the compaction (summary + the tail not already taken
        # back), then every row appended since
        earlier = edits[:edits.index(standing)]
        hidden = [e for e in earlier if e.kind in (UNDONE, RETRIED)]
        counted = [m for seq, m in enumerate(messages, start=1)
                   if seq > standing.upto_seq and not any(e.covers(seq) for e in hidden)]
        return len(standing.summary) + len(counted), _tool_calls(counted)
    added = messages[imported or 0:]
    return base[0] + len(added), base[1] + _tool_calls(added)


def _tool_calls(messages: Sequence[Any]) -> int:
    return sum(len(m.tool_calls or []) for m in messages)


def _summary_rows(edit: HistoryEdit, standing: HistoryEdit | None) -> list[Row]:
    active, compacted = (1, 0) if edit is standing else (0, 1)
    return [Row({"role": m["role"], "content": m["content"], "timestamp": edit.at.timestamp(), "observed": 0,
                 "active": active, "compacted": compacted}, None, summary_of=edit) for m in edit.summary]


def _archive_kept_rows_before(rows: list[Row], standing: HistoryEdit) -> None:
    """A compaction archives every live row before its summary, markers too (as Hermes does)."""
    for row in rows:
        if row.summary_of is standing:
            break
        if row.seq is None and row.summary_of is None and row.fields.get("active", 1) == 1:
            row.fields = {**row.fields, "active": 0, "compacted": 1}
