"""A turn's reply is stored once: its DeliveryRecorded event refers to the transcript message
(session_id, seq) instead of carrying the words again, and every reader of a delivery's words
(the send, the sweep, the ledger, time travel) reads them from the transcript. A delivery no
message backs (a command's answer, a silence notice) keeps its own words."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from click.testing import CliRunner

from harness import procs
from harness.log import events
from turnlog import ManualClock, Turnlog
from turnlog.cli import main as cli

from chat import alice, collect, echo, reply_with

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
PREFIX = "♻️ Recovered reply"


def recorded(t: Turnlog) -> list[Any]:
    return [e.event for e in events(t, "DeliveryRecorded")]


def test_a_turns_delivery_refers_to_its_message_and_reads_its_words_from_there(t: Turnlog, db: str) -> None:
    sent: list[str] = []
    [outcome] = t.handle_message(alice("m1"), "what is the answer?", reply_with("the answer is 42"), collect(sent))
    assert sent == ["the answer is 42"]
    [event] = recorded(t)
    # recorded already attempting, right before the send: one event, no DeliveryAttempting
    assert (event.content, event.seq, event.class_version) == (None, outcome.reply_seq, 4)
    assert (event.attempting_owner, event.attempt) == (t.owner, 1)
    assert events(t, "DeliveryAttempting") == []

    [row] = t.ledger()
    assert (row.content, row.state) == ("the answer is 42", "delivered")
    listed = CliRunner().invoke(cli, ["--db", db, "ledger", "--json"], env={"TURNLOG_DB": None})
    assert listed.exit_code == 0, listed.output
    assert '"content": "the answer is 42"' in listed.output
    [then] = t.at(t.maintenance.log_head()).ledger()
    assert then["content"] == "the answer is 42"


def test_a_command_answer_and_a_silence_notice_keep_their_own_words(t: Turnlog) -> None:
    t.handle_message(alice("m1"), "hello", echo, collect([]))
    t.handle_message(alice("m2"), "anything?", reply_with("[SILENT]"), collect([]))
    status = alice("m3")
    result = t.command(status, "/status")
    t.turns.record_command_reply(status, result)
    words = [e.content for e in recorded(t)]
    assert words[0] is None  # the echo: its transcript message holds it
    assert "silence marker" in words[1]  # the notice is not the message ("[SILENT]")
    assert words[2] == result.reply  # a command's answer is in no transcript
    assert sorted(r.content for r in t.ledger()) == sorted(["re: hello", words[1], result.reply])


def test_a_failed_reply_is_resent_by_the_sweep_with_the_transcripts_words(make_turnlog: Any) -> None:
    t = make_turnlog(owner="gw-a")

    def refuse(text: str) -> None:
        raise ConnectionError("platform down")
    t.handle_message(alice("m1"), "ping", reply_with("pong, from the transcript"), refuse)
    sent: list[str] = []
    report = t.sweep_deliveries(lambda target, text: sent.append(text))
    assert report.delivered and sent == [PREFIX + sent[0][len(PREFIX):]]
    assert sent[0].endswith("\n\npong, from the transcript")


# Killed right after the commit that records the reply (and its attempt), before the send.
KILLED_AFTER_THE_RECORD = """
from turnlog import SessionSource
from turnlog.domain.delivery import Delivery
src = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", message_id="m1")
t = kit.turnlog()
t.start_gateway("main")
kit.kill_after_save(t, lambda items: any(isinstance(i, Delivery) for i in items))
t.handle_message(src, "what is the answer?", lambda history, item: "the answer is 42, said once", print)
"""


def test_a_reply_recorded_then_killed_before_its_send_is_redelivered_from_the_transcript(db: str) -> None:
    procs.crash(db, KILLED_AFTER_THE_RECORD, at=T0)
    t = Turnlog(db, clock=ManualClock(T0 + timedelta(minutes=2)))
    try:
        [event] = recorded(t)
        assert event.content is None
        [row] = t.ledger()
        assert (row.state, row.content) == ("attempting", "the answer is 42, said once")
        [turn] = t.start_gateway("main").recovery.interrupted
        assert turn.action == "redeliver"
        sent: list[tuple[dict[str, Any], str]] = []
        assert len(t.sweep_deliveries(lambda target, text: sent.append((target, text))).delivered) == 1
        [(target, text)] = sent
        assert target["chat_id"] == "42"
        assert text.startswith(PREFIX) and text.endswith("\n\nthe answer is 42, said once")
        assert t.sweep_deliveries(lambda target, text: sent.append((target, text))).delivered == []
        # the ledger knows: a second attempt, marked recovered, delivered
        [row] = t.ledger()
        assert (row.state, row.attempts, row.recovered) == ("delivered", 2, True)
        assert [e.recovered for e in events(t, "DeliveryAttempting")] == [True]
    finally:
        t.close()


def test_an_erased_subjects_referred_reply_reads_erased_in_the_ledger(t: Turnlog) -> None:
    t.handle_message(alice("m1"), "hello", reply_with("a reply that names the user"), collect([]))
    t.erase_subject("telegram:42", actor="operator", cause="erase request")
    [row] = t.ledger()
    assert row.content == "[erased]"
