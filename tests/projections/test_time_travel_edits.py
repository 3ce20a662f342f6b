"""Time travel across the edits of the agent's history: `at` before an edit shows the old
history, after it the messages' fates; `diff` names the edit."""

from __future__ import annotations

from turnlog import Turnlog

from chat import alice, echo


def chat(t: Turnlog, *texts: str) -> str:
    for text in texts:
        [outcome] = t.handle_message(alice(f"m-{text}"), text, echo, lambda text: None)
    return outcome.session_id


def fates(rows) -> list[tuple[int, str | None]]:
    return [(r["seq"], r["fate"]) for r in rows]


def head(t: Turnlog) -> int:
    return t.maintenance.log_head()


def test_at_and_diff_across_an_undo_a_retry_and_a_compaction(t):
    session_id = chat(t, "one", "two", "three")
    before_undo = head(t)
    t.command(alice("u1"), "/undo")
    after_undo = head(t)
    t.command(alice("r1"), "/retry")
    t.run_next(alice(), echo, lambda text: None)
    after_retry = head(t)
    t.compact(session_id, summary="summary", keep_turns=1)
    after_compaction = head(t)

    assert fates(t.at(before_undo).transcript(session_id)) == [(s, None) for s in range(1, 7)]
    assert fates(t.at(after_undo).transcript(session_id)) == [
        (1, None), (2, None), (3, None), (4, None), (5, "undone"), (6, "undone")]
    assert fates(t.at(after_retry).transcript(session_id)) == [
        (1, None), (2, None), (3, "retried"), (4, "retried"), (5, "undone"), (6, "undone"), (7, None), (8, None)]
    assert fates(t.at(after_compaction).transcript(session_id)) == [
        (1, "compacted"), (2, "compacted"), (3, "retried"), (4, "retried"), (5, "undone"), (6, "undone"),
        (7, None), (8, None)]
    assert fates(t.transcript(session_id)) == fates(t.at(after_compaction).transcript(session_id))

    undo = t.diff(before_undo, after_undo)["sessions"][session_id]
    assert undo["history_edits"] == [{"edit": "undone", "from_seq": 5, "upto_seq": 6}]
    retry = t.diff(after_undo, after_retry)["sessions"][session_id]
    assert retry["history_edits"] == [{"edit": "retried", "from_seq": 3, "upto_seq": 6}]
    assert retry["messages_added"] == 2
    assert t.diff(after_retry, after_compaction)["sessions"][session_id]["history_edits"] == [
        {"edit": "compacted", "from_seq": 1, "upto_seq": 2, "focus": None, "model": None}]
    assert t.at(before_undo).session(session_id)["history_edits"] == []


def test_history_summarises_the_edits(t):
    session_id = chat(t, "one", "two")
    t.command(alice("u1"), "/undo")
    t.command(alice("r1"), "/retry")
    t.run_next(alice(), echo, lambda text: None)
    t.compact(session_id, summary="summary")
    summaries = {e.event: e.summary for e in t.history(session_id)
                 if e.event in ("TurnsUndone", "TurnRetried", "TranscriptCompacted")}
    assert summaries == {"TurnsUndone": "undid 1 turn(s): messages 3..4 left the agent's history",
                         "TurnRetried": "retried the last turn: messages 1..4 left the agent's history, “one” runs again",
                         "TranscriptCompacted": "history compacted: seqs 1..6 -> a summary"}
