"""The reads the viewer, ingest and bench make through Turnlog: the log's head and the events
around a position, the gateways and their boots, the queue depths, the finished turns' spans,
and what became of each accepted message."""

from __future__ import annotations

from turnlog import BootSummary, LogEvent, MessageFate, QueueDepth, TurnSpan

from chat import alice


def answer(history, item):
    return f"re: {item.text}"


def nowhere(text):
    pass


def test_the_log_head_and_the_events_around_a_position(t):
    assert t.maintenance.log_head() == 0
    t.handle_message(alice("m1", user_name="alice"), "hello", answer, nowhere)
    head = t.maintenance.log_head()
    window = t.events_around(head, before=2, after=2)
    assert [e.position for e in window] == [head - 2, head - 1, head]
    assert all(isinstance(e, LogEvent) and e.event and e.summary is not None for e in window)
    assert set(window[0].to_dict()) == {"position", "at", "event", "actor", "cause", "session_id", "summary"}


def test_the_gateways_that_booted_and_their_boots(t, other):
    assert t.gateways() == [] and t.boots("main") == []
    t.start_gateway("main")
    t.stop_gateway()
    other.start_gateway("main")
    assert t.gateways() == ["main"]
    boots = t.boots("main")
    assert [b.boot_id for b in boots] == ["gateway-a", "gateway-b"]
    assert isinstance(boots[0], BootSummary) and boots[0].ended_clean is True and boots[1].ended_clean is None
    assert t.status("main").last_boot == boots[-1]


def test_queue_depths_turn_spans_and_message_fates(t):
    t.accept(alice("m1", user_name="alice"), "first")
    assert t.queue_depths() == [QueueDepth(t.routing_key(alice("m1", user_name="alice")), 1, 0)]
    assert t.turn_spans() == []
    while t.run_next(alice("m1", user_name="alice"), answer, nowhere) is not None:
        pass
    assert t.queue_depths() == []
    spans = t.turn_spans()
    assert len(spans) == 1 and isinstance(spans[0], TurnSpan) and spans[0].seconds >= 0
    [fate] = t.message_fates(alice("m1", user_name="alice"))
    assert isinstance(fate, MessageFate) and (fate.message_id, fate.state, fate.outcome) == ("m1", "completed", "answered")
    assert t.route_id(alice("m1", user_name="alice")) == t.routes()[0].route_id
