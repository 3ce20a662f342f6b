"""Issue 19 item 21: a gateway SIGKILLed between an assistant tool call and its result.

The child's agent streams an assistant message with tool_calls (saved before the generator is
advanced, commands/turn.py), then signals the parent, which kills it while "the tool runs".
After the restart, recovery records a tool result for the cut-off call, so the history the
resumed agent is handed has the shape model APIs accept: the call answered right after its
assistant message, before the resume note.
"""

from __future__ import annotations

from harness import procs
from turnlog import ManualClock, Turnlog
from turnlog.domain.tool_answers import INTERRUPTED_RESULT, shape_problems

CUT_OFF_IN_TOOL = """
from turnlog import SessionSource
src = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", message_id="m1")
t = kit.turnlog()
t.start_gateway("main")
def agent(history, item):
    call = {"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": '{"cmd": "make"}'}}
    yield {"role": "assistant", "content": "", "tool_calls": [call], "finish_reason": "tool_calls"}
    kit.ready(boot=t.owner, session_id=history[-1].session_id)  # the call is in the log; killed as the tool runs
    kit.hang()
    yield {"role": "tool", "tool_call_id": "call_1", "name": "terminal", "content": "built"}
    yield {"role": "assistant", "content": "built it"}
t.handle_message(src, "build it please", agent, print)
"""


def test_a_tool_call_cut_off_by_sigkill_is_answered_before_the_resume(tmp_path):
    db = str(tmp_path / "t.db")
    killed = procs.crash(db, CUT_OFF_IN_TOOL, at="2026-03-01T09:00:00+00:00")
    session_id, boot_id = killed.data["session_id"], killed.data["boot"]
    with Turnlog(db, clock=ManualClock("2026-03-01T09:05:00+00:00")) as t:
        cut = t.transcript(session_id)
        assert [m["role"] for m in cut] == ["user", "assistant"]
        assert shape_problems(cut) == ["message 1: tool call 'call_1' is not answered (end of history)"]

        report = t.start_gateway("main")
        assert [x.action for x in report.recovery.interrupted] == ["resume_pending"]
        seen = {}

        def resumed(history, item):
            seen["history"] = list(history)
            return "picking up the build"
        sent: list[str] = []
        [outcome] = t.resume_interrupted(resumed, sent.append)

        history = seen["history"]
        assert [(m.role, m.tool_call_id, m.name, m.content) for m in history[:3]] == [
            ("user", None, None, "build it please"),
            ("assistant", None, None, ""),
            ("tool", "call_1", "terminal", INTERRUPTED_RESULT)]
        assert history[1].tool_calls[0]["id"] == "call_1"
        assert [m.role for m in history[3:]] == ["system"]  # the resume note comes after the answer
        note = history[3].content
        assert "cut off and did not run to completion: terminal (call_1)" in note
        assert "completed before the interruption" not in note  # the cut-off call did not complete
        assert shape_problems(history) == []
        assert sent == ["picking up the build"]

        # The answer is an event of the log, recorded by recovery before the resume started.
        entries = [e for e in t.history(session_id)
                   if e.event in ("MessageAppended", "LeaseRevoked", "LeaseAcquired")]
        answer = next(e for e in entries if e.event == "MessageAppended" and e.data["role"] == "tool")
        assert (answer.actor, answer.cause) == ("system:recovery", f"recovery:{boot_id}")
        assert (answer.data["tool_call_id"], answer.data["name"], answer.data["content"],
                answer.data["finish_reason"]) == ("call_1", "terminal", INTERRUPTED_RESULT, "interrupted")
        revoked = next(e for e in entries if e.event == "LeaseRevoked")
        resume_started = [e for e in entries if e.event == "LeaseAcquired"][-1]
        assert revoked.data["last_seq"] == 3  # the answer's seq: the next turn's first message follows it
        assert answer.position < resume_started.position
        assert [m["role"] for m in t.transcript(session_id)] == ["user", "assistant", "tool", "system", "assistant"]
        assert shape_problems(t.transcript(session_id)) == []
        assert outcome.user_seq == 4  # the note took the seq after the answer
