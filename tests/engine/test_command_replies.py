"""A slash command's own answer owed through the delivery ledger (Turnlog.turns.record_command_reply):
one delivery per command message, sent and settled like a turn's reply, and a failed send settled
by the next boot's sweep, once, without touching the turn that the session may owe."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from harness import procs
from turnlog import ManualClock, Turnlog

from chat import alice, collect, echo

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
# The child answers /status through the ledger and is killed inside the send (after it reached the chat).
KILLED_IN_COMMAND_SEND = """
from chat import alice
t = kit.turnlog()
t.start_gateway("main")
result = t.command(alice("m1"), "/status")
ident = t.turns.record_command_reply(alice("m1"), result)
def send(text):
    kit.ready(delivery_id=str(ident), text=text)
    kit.hang()
t.turns.deliver(ident, send)
"""

PREFIX = "♻️ Recovered reply"


def refuse(text: str) -> None:
    raise ConnectionError("platform API unavailable")


def test_one_command_message_owes_one_answer(t: Turnlog) -> None:
    t.handle_message(alice("m1"), "hello", echo, collect([]))
    status = alice("m2")
    result = t.command(status, "/status")
    ident = t.turns.record_command_reply(status, result)
    assert ident is not None and t.turns.record_command_reply(status, result) is None  # owed once
    sent: list[str] = []
    assert t.turns.deliver(ident, collect(sent)) == "delivered"
    assert sent == [result.reply]
    [row] = [row for row in t.ledger() if row.seq == 0]
    assert (row.delivery_id, row.state, row.session_id, row.content) == (str(ident), "delivered",
                                                                         result.session_id, result.reply)
    redelivered = t.command(status, "/status")
    assert redelivered.duplicate and t.turns.record_command_reply(status, redelivered) is None


def test_a_failed_command_answer_is_sent_once_by_the_next_boots_sweep(make_turnlog: Any) -> None:
    first = make_turnlog(owner="boot-1")
    first.start_gateway("main")
    first.handle_message(alice("m1"), "hello", echo, collect([]))
    first.mark_resume_pending(alice())  # the session owes a resumed turn: the command's answer is not it
    result = first.command(alice("m2"), "/status")
    ident = first.turns.record_command_reply(alice("m2"), result)
    assert ident is not None and first.turns.deliver(ident, refuse) == "failed"
    first.close()

    again = make_turnlog(owner="boot-2")
    again.start_gateway("main")
    sent: list[str] = []
    swept = again.sweep_deliveries(collect(sent))
    assert swept.delivered == [str(ident)]
    assert len(sent) == 1 and sent[0].startswith(PREFIX) and sent[0].endswith(result.reply or "?")
    assert again.sweep_deliveries(collect(sent)).delivered == [] and len(sent) == 1
    assert [c.session_id for c in again.resume_candidates("main")] == [result.session_id]


def test_a_command_answer_cut_off_by_a_kill_in_its_send_is_settled_once_by_the_next_boot(db: str,
                                                                                        tmp_path: Path) -> None:
    killed = procs.crash(db, KILLED_IN_COMMAND_SEND, at=T0)
    again = Turnlog(db, clock=ManualClock(T0 + timedelta(minutes=2)))
    again.start_gateway("main")
    sent: list[str] = []
    swept = again.sweep_deliveries(collect(sent))  # no reconcile hook: the default policy resends, marked
    assert swept.delivered == [killed.data["delivery_id"]]
    [row] = again.ledger()
    assert killed.data["text"] == row.content  # what reached the chat before the kill
    assert len(sent) == 1 and sent[0].startswith(PREFIX) and sent[0].endswith(row.content)
    assert row.state == "delivered" and row.session_id == ""  # /status before the key had a session
    assert again.sweep_deliveries(collect(sent)).delivered == [] and len(sent) == 1
    again.close()
