"""Rich replies (issue 12, item 4): tool calls, tool results and several messages per turn, each
appended under the lease as it happens; only messages meant for the user become deliveries; a
tool loop killed after its third call keeps calls 1-3 and their results, and the resume sees them."""

from __future__ import annotations

import dataclasses

import pytest

from harness import procs
from turnlog import InvalidRequest, ManualClock, ReplyMessage, SessionSource, Turnlog, Usage

from chat import alice, reply_with


def call(n: int) -> dict:
    return {"id": f"call_{n}", "type": "function", "function": {"name": "lookup", "arguments": f'{{"n": {n}}}'}}


def test_a_turn_with_tool_calls_and_two_messages_for_the_user(tmp_path):
    sent: list[str] = []

    def agent(history, item):
        yield {"role": "assistant", "content": "", "tool_calls": [call(1)], "finish_reason": "tool_calls",
               "model": "m-large", "usage": {"prompt_tokens": 120, "completion_tokens": 9,
                                             "prompt_tokens_details": {"cached_tokens": 100}}}
        yield {"role": "tool", "tool_call_id": "call_1", "name": "lookup", "content": "sunny"}
        yield ReplyMessage(content="Checking one more thing…")  # for the user, not the last
        yield ReplyMessage(content="It is sunny.", finish_reason="stop", model="m-large",
                           usage=Usage(input_tokens=140, output_tokens=5, reasoning_tokens=3, cache_write_tokens=7))

    with Turnlog(str(tmp_path / "t.db"), clock=ManualClock()) as t:
        [outcome] = t.handle_message(alice("m1"), "weather?", agent, sent.append)
        session_id = outcome.session_id
        messages = t.transcript(session_id)
        assert [(m["role"], m["content"], m["tool_call_id"], m["name"], m["finish_reason"]) for m in messages] == [
            ("user", "weather?", None, None, None),
            ("assistant", "", None, None, "tool_calls"),
            ("tool", "sunny", "call_1", "lookup", None),
            ("assistant", "Checking one more thing…", None, None, None),
            ("assistant", "It is sunny.", None, None, "stop")]
        assert messages[1]["tool_calls"] == [call(1)]
        assert len({m["turn_id"] for m in messages}) == 1
        assert (outcome.user_seq, outcome.reply_seq, outcome.delivery_state) == (1, 5, "delivered")
        assert sent == ["Checking one more thing…", "It is sunny."]
        assert [(r.seq, r.state, r.content) for r in t.ledger()] == [
            (4, "delivered", "Checking one more thing…"), (5, "delivered", "It is sunny.")]
        assert t.usage(session_id) == [
            {"seq": 2, "model": "m-large", "input_tokens": 120, "output_tokens": 9, "cache_read_tokens": 100,
             "turn_id": outcome.turn_id},
            {"seq": 5, "model": "m-large", "input_tokens": 140, "output_tokens": 5, "cache_write_tokens": 7,
             "reasoning_tokens": 3, "turn_id": outcome.turn_id}]
        assert messages[4]["token_count"] == 5
        assert t.queue(alice("m1")) == [] and t.turns.holder(session_id) is None


def test_a_list_reply_and_a_plain_string_reply(tmp_path):
    with Turnlog(str(tmp_path / "t.db"), clock=ManualClock()) as t:
        sent: list[str] = []
        t.handle_message(alice("m1"), "one", lambda h, i: [{"role": "assistant", "content": "a list answer"}], sent.append)
        t.handle_message(dataclasses.replace(alice("m1"), message_id="m2"), "two", reply_with("a plain answer"), sent.append)
        assert sent == ["a list answer", "a plain answer"]


@pytest.mark.parametrize("reply, error", [
    ([{"role": "assistant", "content": "", "tool_calls": [call(1)]}], "did not end with an assistant message"),
    ([{"role": "tool", "content": "x"}], "needs the tool_call_id"),
    ([{"role": "user", "content": "x"}], "role must be assistant or tool"),
    ([{"role": "assistant", "content": "x", "colour": "red"}], "unknown field 'colour'"),
    ([{"role": "assistant", "content": "x", "usage": {"prompt_tokens": -1}}], "non-negative integer"),
    (42, "must be a str, a message or an iterable"),
])
def test_a_bad_rich_reply_fails_the_turn_with_one_line(tmp_path, reply, error):
    with Turnlog(str(tmp_path / "t.db"), clock=ManualClock()) as t:
        with pytest.raises(InvalidRequest, match=error):
            t.handle_message(alice("m1"), "hi", lambda h, i: reply, lambda text: None)
        [item] = [h for h in t.history(alice("m1")) if h.event == "InboundCompleted"]
        assert item.data["outcome"] == "failed" and t.queue(alice("m1")) == []
        assert t.turns.holder(t.get_or_create_session(alice("m1")).session_id) is None


TOOL_LOOP = """
from turnlog import SessionSource
src = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", message_id="m1")
t = kit.turnlog()
t.start_gateway("main")
def agent(history, item):
    for n in range(1, 6):
        call = {"id": f"call_{n}", "type": "function", "function": {"name": "lookup", "arguments": str(n)}}
        yield {"role": "assistant", "content": "", "tool_calls": [call]}
        if n == 4:
            kit.ready(boot=t.owner, session_id=history[-1].session_id)  # killed while tool 4 runs
            kit.hang()
        yield {"role": "tool", "tool_call_id": f"call_{n}", "name": "lookup", "content": f"result {n}"}
    yield {"role": "assistant", "content": "all five done"}
t.handle_message(src, "run the five lookups", agent, print)
"""


def test_a_tool_loop_killed_after_call_three_keeps_calls_and_results_and_the_resume_sees_them(tmp_path):
    db = str(tmp_path / "t.db")
    killed = procs.crash(db, TOOL_LOOP, at="2026-03-01T09:00:00+00:00")
    session_id = killed.data["session_id"]
    with Turnlog(db, clock=ManualClock("2026-03-01T09:05:00+00:00")) as t:
        done = [(m["role"], m["tool_call_id"] or (m["tool_calls"] or [{}])[0].get("id"), m["content"])
                for m in t.transcript(session_id)]
        assert done == [("user", None, "run the five lookups"),
                        ("assistant", "call_1", ""), ("tool", "call_1", "result 1"),
                        ("assistant", "call_2", ""), ("tool", "call_2", "result 2"),
                        ("assistant", "call_3", ""), ("tool", "call_3", "result 3"),
                        ("assistant", "call_4", "")]
        report = t.start_gateway("main")
        assert [x.action for x in report.recovery.interrupted] == ["resume_pending"]
        seen = {}

        def resumed(history, item):
            seen["history"] = [(m.role, m.tool_call_id) for m in history]
            seen["note"] = history[-1].content
            return "continuing from call 4"
        sent: list[str] = []
        [outcome] = t.resume_interrupted(resumed, sent.append)
        assert seen["history"][:7] == [("user", None), ("assistant", None), ("tool", "call_1"), ("assistant", None),
                                       ("tool", "call_2"), ("assistant", None), ("tool", "call_3")]
        assert "lookup (call_1), lookup (call_2), lookup (call_3)" in seen["note"]
        assert "do not re-run tool calls that already completed" in seen["note"]
        assert sent == ["continuing from call 4"] and t.queue(SessionSource.from_dict(alice("m1").to_dict())) == []
