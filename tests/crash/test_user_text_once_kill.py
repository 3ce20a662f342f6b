"""A gateway SIGKILLed after the commit that accepts a message and starts its turn (one inbox
event that keeps no words: the user message holds them) and before the reply: the restarted
engine resumes the turn and its responder gets the item with its full text, read from the
transcript."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from harness import procs
from harness.log import events
from turnlog import ManualClock, Turnlog

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
WORDS = "please summarise the quarterly report, all three sections"

KILLED_AFTER_THE_START = f"""
from turnlog import SessionSource
from turnlog.domain.inbox import Inbox
from turnlog.domain.transcript import MessageAppended
src = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", message_id="m1")
t = kit.turnlog()
t.start_gateway("main")
kit.kill_after_save(t, lambda items: any(isinstance(i, Inbox) for i in items)
                    and any(isinstance(i, MessageAppended) for i in items))
t.handle_message(src, {WORDS!r}, lambda history, item: "never reached", print)
"""


def test_a_turn_killed_after_its_accept_and_start_resumes_with_the_items_words(tmp_path):
    db = str(tmp_path / "t.db")
    procs.crash(db, KILLED_AFTER_THE_START, at=T0)
    with Turnlog(db, clock=ManualClock(T0 + timedelta(minutes=2))) as t:
        [accepted] = events(t, "InboundAccepted")
        assert (accepted.event.text, accepted.event.turn_id is not None) == (None, True)
        assert events(t, "InboundStarted") == []
        [turn] = t.start_gateway("main").recovery.interrupted
        assert turn.action == "resume_pending"
        seen = []

        def agent(history, item):
            seen.append((item.item_id, item.text, [m.content for m in history if m.role == "user"]))
            return "here is the summary"
        sent: list[str] = []
        [outcome] = t.resume_interrupted(agent, sent.append)
        assert seen == [("1", WORDS, [WORDS])]
        assert sent == ["here is the summary"]
        assert t.queue(outcome.session_key) == []
        assert [m["content"] for m in t.transcript(outcome.session_id) if m["role"] == "user"] == [WORDS]
