"""The rules of the agent's history under /undo, /retry and in-place compaction (domain/history.py)."""

from dataclasses import dataclass
from datetime import datetime, timezone

import pytest

from turnlog.domain.history import (COMPACTED, RETRIED, UNDONE, HistoryEdit, HistoryEditError, agent_history,
                                    fallback_summary, fate_of, history_floor, history_length, plan_compaction, plan_retry,
                                    plan_undo, summary_messages)

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Msg:
    originator_version: int
    role: str
    content: str


def chat(*turns: str) -> list[Msg]:
    """user/assistant pairs: seq 1 user turns[0], seq 2 its answer, ..."""
    out = []
    for text in turns:
        out.append(Msg(len(out) + 1, "user", text))
        out.append(Msg(len(out) + 1, "assistant", f"re: {text}"))
    return out


def summary(edit, i, m):
    return Msg(edit.upto_seq, m["role"], m["content"])


def test_undone_and_retried_messages_leave_the_history_and_keep_their_fate():
    messages = chat("a", "b", "c")
    edits = [HistoryEdit(UNDONE, 5, 6, AT)]
    assert [m.content for m in agent_history(messages, edits, summary)] == ["a", "re: a", "b", "re: b"]
    assert fate_of(5, edits) == UNDONE and fate_of(4, edits) is None
    edits.append(HistoryEdit(RETRIED, 3, 4, AT))
    assert [m.content for m in agent_history(messages, edits, summary)] == ["a", "re: a"]


def test_the_last_compaction_stands_and_its_summary_heads_the_history():
    messages = chat("a", "b", "c")
    first = HistoryEdit(COMPACTED, 1, 2, AT, summary=({"role": "user", "content": "S1"},))
    assert [m.content for m in agent_history(messages, [first], summary)] == ["S1", "b", "re: b", "c", "re: c"]
    second = HistoryEdit(COMPACTED, 1, 4, AT, summary=({"role": "user", "content": "S2"},))
    assert [m.content for m in agent_history(messages[4:], [first, second], summary)] == ["S2", "c", "re: c"]
    assert history_floor([first, second]) == 4
    assert fate_of(1, [first, second]) == COMPACTED


def test_an_undone_message_a_compaction_covered_stays_undone():
    edits = [HistoryEdit(UNDONE, 3, 4, AT), HistoryEdit(COMPACTED, 1, 6, AT, summary=({"role": "user", "content": "S"},))]
    assert fate_of(3, edits) == UNDONE and fate_of(2, edits) == COMPACTED


def test_undo_clamps_to_the_oldest_user_turn_and_echoes_the_backed_up_text():
    messages = chat("first", "x" * 300)
    plan = plan_undo(messages, [], last_seq=4, turns=5)
    assert (plan.from_seq, plan.upto_seq, plan.turns) == (1, 4, 2)
    assert plan.echoed == ("first", "x" * 200)
    assert plan_undo(messages, [], last_seq=4, turns=1).from_seq == 3


def test_undo_never_reaches_into_a_compacted_range():
    messages = chat("a", "b", "c")
    edits = [HistoryEdit(COMPACTED, 1, 4, AT, summary=({"role": "user", "content": "S"},))]
    history = agent_history(messages, edits, summary)
    plan = plan_undo(history, edits, last_seq=6, turns=3)
    assert (plan.from_seq, plan.turns) == (5, 1)
    with pytest.raises(HistoryEditError, match="nothing to undo"):
        plan_undo(history[:1], edits, last_seq=4, turns=1)


def test_undo_refuses_a_count_that_is_not_a_positive_integer():
    for bad in (0, -1, True, "2"):
        with pytest.raises(HistoryEditError, match="positive integer"):
            plan_undo(chat("a"), [], last_seq=2, turns=bad)


def test_retry_backs_up_the_last_turn_and_runs_its_whole_text():
    plan, text = plan_retry(chat("a", "y" * 300), [], last_seq=4)
    assert (plan.from_seq, plan.upto_seq, text) == (3, 4, "y" * 300)
    with pytest.raises(HistoryEditError, match="nothing to retry"):
        plan_retry([], [], last_seq=0)


def test_compaction_keeps_the_last_turns_and_resummarises_an_earlier_summary():
    messages = chat("a", "b", "c", "d")
    assert plan_compaction(messages, [], keep_turns=2)[:2] == (1, 4)
    edits = [HistoryEdit(COMPACTED, 1, 4, AT, summary=({"role": "user", "content": "S"},))]
    history = agent_history(messages, edits, summary)
    start, upto, replaced = plan_compaction(history, edits, keep_turns=1)
    assert (start, upto) == (1, 6)
    assert [m.content for m in replaced] == ["S", "c", "re: c"]
    with pytest.raises(HistoryEditError, match="nothing to compact"):
        plan_compaction(history, edits, keep_turns=2)


def test_the_fallback_summary_is_deterministic_and_marked_reference_only():
    messages = chat("plan the trip", "book the hotel")
    one = fallback_summary(messages, "travel")
    assert one == fallback_summary(messages, "travel")
    text = one[0]["content"]
    assert text.startswith("[CONTEXT COMPACTION — REFERENCE ONLY]") and "Focus: travel" in text
    assert "plan the trip" in text and "re: book the hotel" in text


def test_a_summariser_answer_must_be_text_or_messages():
    assert summary_messages("short") == ({"role": "user", "content": "short"},)
    assert summary_messages([{"role": "assistant", "content": "x"}]) == ({"role": "assistant", "content": "x"},)
    for bad in ("", " ", [], [{"role": "tool", "content": "x"}], [{"content": 3}], [{"content": ""}], 7):
        with pytest.raises(HistoryEditError):
            summary_messages(bad)


def test_the_history_length_counts_what_the_agent_is_handed_without_reading_it():
    messages = chat("a", "b", "c", "d")
    cases = [[], [HistoryEdit(UNDONE, 7, 8, AT)],
             [HistoryEdit(COMPACTED, 1, 4, AT, summary=({"role": "user", "content": "S"},) * 2)],
             [HistoryEdit(UNDONE, 3, 4, AT), HistoryEdit(COMPACTED, 1, 2, AT, summary=({"role": "user", "content": "S"},)),
              HistoryEdit(RETRIED, 7, 8, AT)]]
    for edits in cases:
        assert history_length(8, edits) == len(agent_history(messages, edits, summary)), edits
    assert [history_length(8, e) for e in cases] == [8, 6, 6, 3]
