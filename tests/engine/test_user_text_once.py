"""A message accepted on an idle key and its turn started in one transaction is one inbox event
(InboundAccepted version 2, carrying the start), and the user's words are stored once: in the
turn's user message. The inbox event keeps only the same-text dedup key and where the message is;
every reader of the item's words (the responder, the queue, time travel) reads them from
the transcript. A message that waits for a busy key keeps its words in its own event."""

from __future__ import annotations

import sqlite3
from typing import Any

from harness.log import events
from turnlog import Turnlog
from turnlog.storage.event_compressor import inflate

from chat import alice, collect

PHRASE = "periwinkle zeppelin 7731, said once"


def stored_states(db: str) -> list[tuple[str, bytes]]:
    """Every stored event's topic and JSON state (the log's own bytes, inflated)."""
    with sqlite3.connect(db) as conn:
        return [(topic, inflate(bytes(state))) for topic, state in
                conn.execute("SELECT topic, state FROM stored_events ORDER BY rowid")]


def test_an_idle_keys_turn_stores_the_users_words_once_in_one_inbox_event_fewer(make_turnlog: Any, db: str) -> None:
    t = make_turnlog(encryption=False)  # the words readable in the stored bytes (sealed, they would not be)
    seen: list[Any] = []

    def agent(history: Any, item: Any) -> str:
        seen.append(item.text)
        return "noted"
    [outcome] = t.handle_message(alice("m1"), PHRASE, agent, collect([]))
    assert seen == [PHRASE]  # the responder still gets the item with its words

    holding = [topic for topic, state in stored_states(db) if PHRASE.encode() in state]
    assert holding == ["turnlog:MessageAppended"]
    inbox = [e.name for e in events(t, "InboundAccepted", "InboundStarted", "InboundCompleted")]
    assert inbox == ["InboundAccepted", "InboundCompleted"]  # was Accepted, Started, Completed
    [accepted] = events(t, "InboundAccepted")
    ev = accepted.event
    assert (ev.class_version, ev.text, ev.session_id, ev.turn_id, ev.seq) == (
        2, None, outcome.session_id, outcome.turn_id, outcome.user_seq)
    assert len(ev.content_key) == 16
    assert (ev.actor, ev.cause) == ("telegram:user:42", "message:m1")
    assert [m["content"] for m in t.transcript(outcome.session_id)] == [PHRASE, "noted"]


def test_the_queue_and_time_travel_read_a_started_items_words_from_the_transcript(t: Turnlog) -> None:
    during: dict[str, Any] = {}

    def agent(history: Any, item: Any) -> str:
        during["queue"] = [(q.text, q.state) for q in t.queue(alice())]
        during["head"] = t.maintenance.log_head()
        return "done"
    t.handle_message(alice("m1"), PHRASE, agent, collect([]))
    assert during["queue"] == [(PHRASE, "started")]
    then = t.at(during["head"]).queue("agent:main:telegram:dm:42")
    assert [(q["text"], q["state"]) for q in then] == [(PHRASE, "started")]
    assert t.queue(alice()) == []  # answered: it left the queue


def test_a_message_that_waits_for_a_busy_key_keeps_its_words_in_its_event(t: Turnlog, other: Turnlog) -> None:
    [first] = t.handle_message(alice("m1"), "first", lambda h, i: "ok", collect([]))
    token = other.turns.acquire_lease(first.session_id, "elsewhere")
    t.accept(alice("m2"), PHRASE)
    waiting = events(t, "InboundAccepted")[-1].event
    assert (waiting.text, waiting.turn_id, waiting.content_key) == (PHRASE, None, None)
    other.turns.release_lease(token)
    seen: list[str] = []
    t.run_next(alice(), lambda h, item: seen.append(item.text) or "ok", collect([]))
    assert seen == [PHRASE]
