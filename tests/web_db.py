"""A small log with hostile text for the web viewer's tests: markup, control characters and CJK
in messages, tool calls, token counts, a rotation by operator suspension, a /resume switch."""

from __future__ import annotations

from turnlog import ManualClock, SequentialIds, Turnlog
from turnlog.domain.source import SessionSource

SCRIPT = "<script>alert('x')</script>"
CONTROL = "bell\x07 escape\x1b[31m"
CJK = "東京の天気 你好世界"
HOSTILE = f"{SCRIPT} {CONTROL} {CJK}"


# Not chat.alice: the user name is markup, so the web pages are seen to escape it.
def alice() -> SessionSource:
    return SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42",
                         user_name="<b>alice</b>")


def build(path: str) -> dict[str, str]:
    """Write the log at `path`; returns the ids the tests look for."""
    clock = ManualClock("2026-03-01T10:00:00+00:00")
    sent: list[str] = []
    with Turnlog(path, clock=clock, session_ids=SequentialIds(), owner="gw-1") as t:
        t.start_gateway("main")
        src = alice()
        src.message_id = "m1"
        t.handle_message(src, HOSTILE, lambda history, item: f"echo {item.text}", sent.append)
        first = t.get_or_create_session(src, touch_activity=False).session_id
        clock.advance(seconds=30)
        token = t.turns.acquire_lease(first, t.routing_key(src))
        t.turns.append_message(token, "assistant", "", tool_calls=[{"id": "c1", "type": "function", "function": {
            "name": "grep", "arguments": '{"pattern": "</details><script>"}'}}], token_count=12)
        t.turns.append_message(token, "tool", "tool said 你好", tool_call_id="c1", name="grep", token_count=5)
        t.turns.release_lease(token)
        clock.advance(minutes=2)
        t.suspend(src, "operator", actor="cli:test", cause="test:suspend")
        clock.advance(minutes=1)
        src.message_id = "m2"
        t.handle_message(src, "second session さようなら", lambda h, item: "ok", sent.append)
        second = t.get_or_create_session(src, touch_activity=False).session_id
        t.switch_session(src, first, actor="telegram:user:42", cause="command:/resume")
        bob = SessionSource(platform="discord", chat_type="dm", chat_id="77", user_id="77")
        bob.message_id = "d1"
        t.handle_message(bob, "plain hello from bob", lambda h, item: "hi bob", sent.append)
        bob_session = t.get_or_create_session(bob, touch_activity=False).session_id
        t.stop_gateway()
        head = t._projections.head()
    return {"first": first, "second": second, "bob": bob_session, "head": str(head)}
