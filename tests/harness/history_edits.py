"""/undo and in-place /compress made in a test through the core's planners and Session events
(domain/history.py, Session.undo / Session.compact), until the chat and CLI commands exist: then
these become `t.command(source, "/undo 1")` and `t.command(source, "/compress here 1")`."""

from __future__ import annotations

from turnlog import Turnlog
from turnlog.domain.history import fallback_summary, plan_compaction, plan_undo


def undo(t: Turnlog, session_id: str, turns: int = 1) -> None:
    ctx = t._ctx
    session = ctx.session(session_id)
    assert session is not None
    plan = plan_undo(t.turns.agent_history(session_id), session.history_edits, len(t.transcript(session_id)), turns)
    session.undo(plan.from_seq, plan.upto_seq, plan.turns, at=ctx.clock.now(), actor="test", cause="test:undo")
    ctx.save(session)


def compact(t: Turnlog, session_id: str, keep_turns: int = 0, focus: str | None = None) -> None:
    ctx = t._ctx
    session = ctx.session(session_id)
    assert session is not None
    from_seq, upto_seq, replaced = plan_compaction(t.turns.agent_history(session_id), session.history_edits,
                                                   keep_turns=keep_turns)
    session.compact(from_seq, upto_seq, fallback_summary(replaced, focus), focus=focus, model=None,
                    kept_turns=keep_turns, at=ctx.clock.now(), actor="test", cause="test:compress")
    ctx.save(session)
