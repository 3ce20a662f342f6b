"""/usage and /status: the session's token usage summed from the usage events recorded with its
replies, and its state, as chat replies."""

from __future__ import annotations

from turnlog import ReplyMessage, Usage
from chat import alice, echo


def agent(history, item):
    yield ReplyMessage(content=f"re: {item.text}", model="m-large",
                       usage=Usage(input_tokens=1200, output_tokens=30, cache_read_tokens=1000))


def test_usage_sums_the_recorded_usage_events(t):
    t.handle_message(alice(), "one", agent, lambda text: None)
    t.handle_message(alice(), "two", agent, lambda text: None)

    result = t.command(alice(), "/usage")

    assert result.reply == "\n".join(["📊 Session token usage", "Model: m-large", "Input tokens: 2,400",
                                      "Output tokens: 60", "Cache read tokens: 2,000", "Total: 4,460",
                                      "API calls: 2"])
    assert not result.changed


def test_usage_without_recorded_usage_estimates_from_the_transcript(t):
    t.handle_message(alice(), "x" * 40, echo, lambda text: None)

    assert t.command(alice(), "/usage").reply == "\n".join([
        "📊 Session info", "Messages: 2", "Estimated context: ~21 tokens",
        "Detailed usage is recorded with the agent's replies."])


def test_usage_of_a_new_session_starts_from_nothing(t):
    t.handle_message(alice(), "one", agent, lambda text: None)
    t.command(alice(), "/new")

    assert t.command(alice(), "/usage").reply == "No usage data available for this session."


def test_status_gives_the_sessions_state(t, clock):
    session_id = t.handle_message(alice(), "one", agent, lambda text: None)[0].session_id
    t.command(alice(), "/title Weekly report")
    clock.advance(minutes=90)
    t.handle_message(alice(), "two", agent, lambda text: None)
    t.accept(alice(), "waiting")

    result = t.command(alice(), "/status")

    assert result.reply == "\n".join([
        "📊 Session status", f"Session ID: {session_id}", "Title: Weekly report",
        "Created: 2026-01-01 00:00 UTC", "Last activity: 2026-01-01 01:30 UTC", "State: active",
        "Model: m-large", "Messages: 4", "Tokens: 4,460", "Agent running: No", "Queued: 1"])
    assert result.session_id == session_id


def test_status_says_when_a_turn_runs(t):
    seen = []

    def slow(history, item):
        seen.append(t.command(alice(), "/status").reply)
        return "done"

    t.handle_message(alice(), "one", slow, lambda text: None)

    assert "Agent running: Yes" in seen[0]
    assert "Agent running: No" in t.command(alice(), "/status").reply


def test_status_without_a_session(t):
    assert t.command(alice(), "/status").reply == "📊 Session status\nNo active session: the next message starts one."
