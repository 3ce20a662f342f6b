"""Issue 19 item 21: the history handed to an agent has the shape model APIs accept.

OpenAI-compatible and Anthropic APIs refuse a history in which an assistant tool call is not
answered by a tool message before the next non-tool message. `shape_problems` is that rule as a
validator; it is applied here to the history the next agent is handed after every way a turn can
be cut off between a call and its result: an imported Hermes session interrupted mid tool-call
(the fixture's Discord thread), a turn whose agent raised, a turn stopped by /stop, a turn that
stalled and lost its lease. (A real SIGKILL: tests/crash/test_cut_off_tool_call.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness.hermes_home import fixture_home

from turnlog import EngineConfig, ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.domain.tool_answers import INTERRUPTED_RESULT, interrupted_result, shape_problems, unanswered_calls

from chat import alice

HOME = fixture_home()
DISCORD = "20261112_164504_50039fe7"  # FIXTURE.md: discord_thread, interrupted mid tool-call
DISCORD_KEY = "agent:main:discord:thread:1311111111111111111:1311111111111111111"
DISCORD_CALL = "toolu_012hzsCFQgqK9eLtqPFT1Pnn"  # its last assistant row's call, never answered in Hermes


def call(call_id: str, name: str = "lookup") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def asks(*ids: str) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [call(i) for i in ids]}


def result(call_id: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "name": "lookup", "content": "ok"}


USER, NOTE, ANSWER = {"role": "user", "content": "hi"}, {"role": "system", "content": "note"}, {
    "role": "assistant", "content": "done"}


# -- the validator, on its own ---------------------------------------------------------------------

@pytest.mark.parametrize("history, problems", [
    ([USER, asks("c1"), result("c1"), ANSWER], []),
    ([USER, asks("c1", "c2"), result("c2"), result("c1"), ANSWER], []),  # parallel calls, any order
    ([USER, asks("c1"), {"role": "session_meta", "content": ""}, result("c1"), ANSWER], []),  # never sent
    ([USER, asks("c1")], ["message 1: tool call 'c1' is not answered (end of history)"]),
    ([USER, asks("c1"), NOTE, result("c1")],
     ["message 1: tool call 'c1' is not answered before message 2 (system)",
      "message 3: tool result 'c1' answers no tool call waiting for one"]),
    ([USER, asks("c1", "c2"), result("c1"), USER],
     ["message 1: tool call 'c2' is not answered before message 3 (user)"]),
    ([USER, result("c9"), ANSWER], ["message 1: tool result 'c9' answers no tool call waiting for one"]),
    ([USER, {"role": "assistant", "content": "", "tool_calls": [{"type": "function"}]}],
     ["message 1: a tool call without an id"]),
])
def test_the_validator_names_what_a_model_api_would_refuse(history, problems):
    assert shape_problems(history) == problems


def test_unanswered_calls_are_found_in_order_with_their_names():
    history = [USER, asks("c1", "c2"), result("c1"), USER, asks("c3")]
    assert [(c.index, c.call_id, c.name) for c in unanswered_calls(history)] == [(1, "c2", "lookup"),
                                                                                 (4, "c3", "lookup")]


# -- the history the next agent is handed -----------------------------------------------------------

class Seen(list):
    """An agent that records the history it is handed (as dicts) and answers."""

    def __call__(self, history, item):
        self.append([dict(role=m.role, content=m.content, tool_calls=m.tool_calls, tool_call_id=m.tool_call_id,
                          name=m.name, actor=m.actor, cause=m.cause) for m in history])
        return "ok"


def discord_engine(path: Path) -> Turnlog:
    lid = str(HOME / "platforms" / "whatsapp" / "session")
    return Turnlog(str(path), clock=ManualClock("2026-12-01T00:00:00+00:00"), session_ids=SequentialIds(),
                   config=EngineConfig(whatsapp_aliases=lid))


def discord_source(message_id: str) -> SessionSource:
    entries = json.loads((HOME / "sessions" / "sessions.json").read_text())
    return SessionSource.from_dict({**entries[DISCORD_KEY]["origin"], "message_id": message_id})


def assert_answered_in_place(history: list[dict], call_id: str, text: str) -> int:
    """The call's answer directly follows its assistant message; returns the answer's index."""
    assert shape_problems(history) == []
    [asked] = [i for i, m in enumerate(history) if any(c["id"] == call_id for c in m["tool_calls"] or ())]
    answer = history[asked + 1]
    assert (answer["role"], answer["tool_call_id"], answer["content"]) == ("tool", call_id, text)
    return asked + 1


@pytest.mark.parametrize("how", ["message", "resume"])
def test_the_next_turn_after_importing_the_discord_thread_has_every_tool_call_answered(tmp_path, how):
    with discord_engine(tmp_path / "t.db") as t:
        t.import_hermes(HOME)
        imported = t.transcript(DISCORD)
        assert shape_problems(imported)  # as Hermes left it: the last call has no result
        seen = Seen()
        if how == "message":
            t.handle_message(discord_source("m-next"), "[Ana] did it run?", seen, lambda text: None)
        else:
            [resumed] = t.resume_interrupted(seen, lambda text: None)
            assert resumed.session_id == DISCORD
        [history] = seen
        at = assert_answered_in_place(history, DISCORD_CALL, INTERRUPTED_RESULT)
        assert history[at]["name"] == "terminal"
        assert [m["role"] for m in history[at + 1:]] == ["user" if how == "message" else "system"]
        if how == "resume":
            assert f"cut off and did not run to completion: terminal ({DISCORD_CALL})" in history[-1]["content"]
        assert (history[at]["actor"], history[at]["cause"]) == (t.owner, history[at + 1]["cause"])
        # An event of the log, before the turn's own first message; the imported rows are untouched.
        transcript = t.transcript(DISCORD)
        assert transcript[:len(imported)] == imported
        assert transcript[len(imported)]["role"] == "tool" and transcript[len(imported)]["seq"] == len(imported) + 1
        assert [m["seq"] for m in transcript] == list(range(1, len(transcript) + 1))
        # Answered once: a later turn finds nothing left to answer.
        t.handle_message(discord_source("m-later"), "[Bo 🐙] thanks", seen, lambda text: None)
        assert shape_problems(seen[-1]) == []
        assert sum(1 for m in seen[-1] if m["tool_call_id"] == DISCORD_CALL) == 1


class Cut(Exception):
    pass


def test_a_turn_whose_agent_raised_between_a_call_and_its_result(tmp_path):
    def broken(history, item):
        yield {"role": "assistant", "content": "", "tool_calls": [call("call_1", "terminal")]}
        raise Cut("the tool runner crashed")

    with Turnlog(str(tmp_path / "t.db"), clock=ManualClock()) as t:
        with pytest.raises(Cut):
            t.handle_message(alice("m1"), "build it", broken, lambda text: None)
        seen = Seen()
        t.handle_message(SessionSource.from_dict({**alice("m1").to_dict(), "message_id": "m2"}), "and?", seen,
                         lambda text: None)
        at = assert_answered_in_place(seen[0], "call_1", interrupted_result("failed"))
        assert [m["role"] for m in seen[0]] == ["user", "assistant", "tool", "user"] and at == 2


def test_a_turn_stopped_between_a_call_and_its_result(tmp_path):
    with Turnlog(str(tmp_path / "t.db"), clock=ManualClock()) as t:
        def stopped(history, item):
            yield {"role": "assistant", "content": "", "tool_calls": [call("call_1", "terminal")]}
            stop = t.command(SessionSource.from_dict({**alice("m1").to_dict(), "message_id": "m-stop"}), "/stop")
            assert stop.reply == "Stopped."
            raise Cut("the runner noticed the stop")

        with pytest.raises(Cut):
            t.handle_message(alice("m1"), "build it", stopped, lambda text: None)
        seen = Seen()
        t.handle_message(SessionSource.from_dict({**alice("m1").to_dict(), "message_id": "m2"}), "again", seen,
                         lambda text: None)
        assert_answered_in_place(seen[0], "call_1", "interrupted by /stop; not run to completion")


def test_a_turn_that_stalled_and_lost_its_lease_between_a_call_and_its_result(tmp_path):
    clock = ManualClock()
    with Turnlog(str(tmp_path / "t.db"), clock=clock) as t:
        routed = t.get_or_create_session(alice("m1"))
        token = t.turns.acquire_lease(routed.session_id, routed.session_key)
        t.turns.append_message(token, "user", "build it")
        t.turns.append_message(token, "assistant", "", tool_calls=[call("call_1", "terminal")])
        clock.advance(t._config.lease_ttl_s + 1)  # the holder stalls past its lease
        seen = Seen()
        t.handle_message(SessionSource.from_dict({**alice("m1").to_dict(), "message_id": "m2"}), "hello?", seen,
                         lambda text: None)
        assert_answered_in_place(seen[0], "call_1", interrupted_result("taken_over"))
