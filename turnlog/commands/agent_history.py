"""The agent's history of a session read from the log: its transcript as edited by /undo, /retry
and in-place compaction (domain/history.py). After a compaction only the messages above the
summary are read, so a long-compacted session costs what its live tail costs."""

from __future__ import annotations

from typing import Any, Sequence

from ..domain.history import HistoryEdit, agent_history, history_floor
from ..domain.session import Session
from ..domain.transcript import MessageAppended, read_transcript, transcript_id
from .context import CommandContext

SUMMARY_CAUSE = "compaction"


def summary_entry(session_id: str, edit: HistoryEdit, index: int, message: dict[str, Any]) -> MessageAppended:
    """A compaction's summary message as the agent sees it: it stands at its range's last seq."""
    return MessageAppended(
        originator_id=transcript_id(session_id), originator_version=edit.upto_seq, timestamp=edit.at,
        session_id=session_id, role=message["role"], content=message["content"], tool_calls=None,
        tool_call_id=None, name=None, token_count=None, finish_reason=None, platform_message_id=None,
        epoch=0, turn_id=f"compaction:{edit.upto_seq}:{index}", actor="system:compaction", cause=SUMMARY_CAUSE)


def read_agent_history(ctx: CommandContext, session_id: str, session: Session | None = None) -> list[MessageAppended]:
    """The session's agent history as the log holds it now, from this process's copy of its
    transcript topped up with the messages added since (storage/transcripts.py)."""
    if session is None:
        session = ctx.session(session_id)
    edits = session.history_edits if session is not None else ()
    ctx.notice_erasures()  # an erase elsewhere: the copy may hold its words
    return edited_history(session_id, ctx.transcripts.messages(session_id, history_floor(edits)), edits)


def agent_history_of(get_events: Any, session_id: str, edits: Sequence[HistoryEdit],
                     upto: int | None = None) -> list[MessageAppended]:
    """The agent's history from the session's `edits` and its transcript up to seq `upto` (time
    travel reads a moment's edits and transcript version)."""
    floor = history_floor(edits)
    return edited_history(session_id, read_transcript(get_events, session_id, after=floor or None, upto=upto), edits)


def edited_history(session_id: str, messages: list[MessageAppended], edits: Sequence[HistoryEdit]
                   ) -> list[MessageAppended]:
    """The transcript's messages above the history floor as the agent sees them after `edits`."""
    if not edits:
        return messages
    return agent_history(messages, edits, lambda edit, i, m: summary_entry(session_id, edit, i, m))
