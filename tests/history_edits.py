"""An in-place compaction for tests of the readers, made the way the core's rules say (domain/history.py)
through the edit step every history edit takes (commands/history_edits.py), while the chat's
/compress and `turnlog compact` are built elsewhere."""

from __future__ import annotations

import warnings
from typing import Any

from turnlog import Turnlog
from turnlog.commands.history_edits import Editing, HistoryEdits
from turnlog.commands.lease import LeaseCommands
from turnlog.domain.history import plan_compaction


def compact(t: Turnlog, session_id: str, summary: str, *, keep_turns: int = 0) -> tuple[int, int]:
    """Compact the session's history, keeping the last `keep_turns` turns; returns the range."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx = t.ctx  # the engine's command context (deprecated public attribute: tests only)
    edits = HistoryEdits(ctx, LeaseCommands(ctx, "test:compaction"))

    def step(editing: Editing) -> tuple[tuple[int, int], list[Any]]:
        from_seq, upto_seq, _ = plan_compaction(editing.history, editing.session.history_edits,
                                                keep_turns=keep_turns)
        editing.session.compact(from_seq, upto_seq, [{"role": "user", "content": summary}], focus=None,
                                model="test", kept_turns=keep_turns, at=editing.at, actor="test",
                                cause="test:compact")
        return (from_seq, upto_seq), []
    # hold: a compaction's summariser is slow work, done while the lease is held and renewed
    return edits.under_lease(session_id, step, actor="test", cause="test:compact", hold=True)
