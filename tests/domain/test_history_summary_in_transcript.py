"""A compaction whose summary is in the transcript already (Hermes writes its summary as rows
after the range: an imported compaction): Session.compact(summary_in_transcript=True)."""

from datetime import datetime, timezone
from uuid import UUID

import pytest

from turnlog.domain.history import COMPACTED, HistoryEditError, agent_history, fate_of
from turnlog.domain.session import Session

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)
SAY = dict(at=AT, actor="test", cause="test")


def session() -> Session:
    return Session.new(Session.Created, id=UUID(int=1), session_id="s1", session_key="k", origin=None, reason="test",
                       previous_session_id=None, parent_session_id=None, **SAY)


class Msg:
    def __init__(self, seq: int, role: str, content: str) -> None:
        self.originator_version, self.role, self.content = seq, role, content


def test_the_history_is_the_transcript_after_the_range() -> None:
    s = session()
    s.compact(1, 4, [], focus=None, model=None, kept_turns=0, summary_in_transcript=True, **SAY)
    [edit] = s.history_edits
    assert (edit.kind, edit.summary) == (COMPACTED, ())
    messages = [Msg(i, "user" if i % 2 else "assistant", f"m{i}") for i in range(1, 8)]
    assert [m.content for m in agent_history(messages, s.history_edits, lambda *a: pytest.fail("no summary"))] == [
        "m5", "m6", "m7"]
    assert fate_of(4, s.history_edits) == COMPACTED and fate_of(5, s.history_edits) is None


def test_a_summary_is_in_the_event_or_in_the_transcript_never_both_nor_neither() -> None:
    s = session()
    with pytest.raises(HistoryEditError, match="needs a summary"):
        s.compact(1, 4, [], focus=None, model=None, kept_turns=0, **SAY)
    with pytest.raises(HistoryEditError, match="not both"):
        s.compact(1, 4, [{"role": "user", "content": "x"}], focus=None, model=None, kept_turns=0,
                  summary_in_transcript=True, **SAY)
    assert s.history_edits == ()
