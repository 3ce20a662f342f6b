"""A slash command's own answer owed through the delivery ledger (Turnlog.turns.record_command_reply):
one delivery per command message, sent and settled like a turn's reply, and a failed send settled
by the next boot's sweep, once, without touching the turn that the session may owe."""

from __future__ import annotations

from typing import Any

from turnlog import Turnlog

from chat import alice, collect, echo

PREFIX = "♻️ Recovered reply"


def refuse(text: str) -> None:
    raise ConnectionError("platform API unavailable")


def test_one_command_message_owes_one_answer(t: Turnlog) -> None:
    t.handle_message(alice("m1"), "hello", echo, collect([]))
    status = alice("m2")
    result = t.command(status, "/status")
    ident = t.turns.record_command_reply(status, result)
    assert ident is not None and t.turns.record_command_reply(status, result) == ident
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
