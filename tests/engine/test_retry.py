"""/retry through the chat path: the last user message runs again as a new turn; the previous
answer and its tool rows leave the agent's history (they stay in the log) and only the new
answer is owed."""

from __future__ import annotations

from turnlog import Turnlog

from chat import alice, collect


def call(n: int) -> dict:
    return {"id": f"call_{n}", "type": "function", "function": {"name": "lookup", "arguments": f'{{"n": {n}}}'}}


class Agent:
    """First answer of each text uses a tool; records the history each turn was handed."""

    def __init__(self) -> None:
        self.histories: list[list[tuple[str, str]]] = []
        self.calls = 0

    def __call__(self, history, item):
        self.histories.append([(m.role, m.content) for m in history])
        self.calls += 1
        if self.calls == 2:
            return [{"role": "assistant", "content": "", "tool_calls": [call(1)], "finish_reason": "tool_calls"},
                    {"role": "tool", "tool_call_id": "call_1", "name": "lookup", "content": "rainy"},
                    {"role": "assistant", "content": "It rains."}]
        return f"re: {item.text}"


def test_retry_after_a_turn_with_tool_calls(t: Turnlog):
    agent, sent = Agent(), []
    t.handle_message(alice("m1"), "hello", agent, collect(sent))
    [outcome] = t.handle_message(alice("m2"), "weather?", agent, collect(sent))
    session_id = outcome.session_id
    assert [r.content for r in t.ledger()] == ["re: hello", "It rains."]

    result = t.command(alice("r1"), "/retry")
    assert result.changed and result.turn_pending and result.reply is None
    assert result.session_id == session_id
    [again] = [o for o in [t.run_next(alice(), agent, collect(sent))] if o is not None]
    assert again.session_id == session_id and again.delivery_state == "delivered"
    # The agent saw the user message once, without the old answer and its tool rows.
    assert agent.histories[-1] == [("user", "hello"), ("assistant", "re: hello"), ("user", "weather?")]
    assert [(m.role, m.content) for m in t.turns.agent_history(session_id)] == [
        ("user", "hello"), ("assistant", "re: hello"), ("user", "weather?"), ("assistant", "re: weather?")]
    # The log keeps everything; the ledger owes the new answer only (the old one was delivered before).
    assert [m["content"] for m in t.transcript(session_id)] == [
        "hello", "re: hello", "weather?", "", "rainy", "It rains.", "weather?", "re: weather?"]
    assert [(r.content, r.state) for r in t.ledger()] == [
        ("re: hello", "delivered"), ("It rains.", "delivered"), ("re: weather?", "delivered")]
    assert sent == ["re: hello", "It rains.", "re: weather?"]
    [retried] = [e for e in t.history(session_id) if e.event == "TurnRetried"]
    assert (retried.data["from_seq"], retried.data["upto_seq"], retried.data["text"]) == (3, 6, "weather?")
    assert retried.cause == "command:/retry:r1"
    assert t.run_next(alice(), agent, collect(sent)) is None  # one turn, not two


def test_nothing_to_retry(t: Turnlog):
    assert t.command(alice("r0"), "/retry").reply == "No previous message to retry."
    t.handle_message(alice("m1"), "hello", Agent(), collect([]))
    t.command(alice("u1"), "/undo")
    result = t.command(alice("r1"), "/retry")
    assert result.reply == "No previous message to retry." and not result.turn_pending
