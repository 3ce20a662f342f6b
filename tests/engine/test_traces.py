"""Traces (docs/operations.md "Metrics and traces"): one span per turn, with children for routing,
the lease, the agent call and each send; the session id as gen_ai.conversation.id; the routing key
with its ids hashed where the context prompt hashes them."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chat import BOB, alice, collect, echo


def traced(make_turnlog):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return make_turnlog(tracer_provider=provider), exporter


def tree(spans):
    """name -> the name of its parent span (None: a root)."""
    by_id = {s.context.span_id: s for s in spans}
    return {s.name: (by_id[s.parent.span_id].name if s.parent is not None else None) for s in spans}


def test_one_turn_is_one_span_tree(make_turnlog):
    t, exporter = traced(make_turnlog)
    t.handle_message(alice("m1"), "hello", echo, collect([]))
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == ["agent", "lease", "routing", "send", "turn"]
    # An idle key's lease is taken in the routing decision's own transaction, so within its span.
    assert tree(spans) == {"turn": None, "routing": "turn", "lease": "routing", "agent": "turn", "send": "turn"}
    assert len({s.context.trace_id for s in spans}) == 1
    turn = next(s for s in spans if s.name == "turn")
    assert turn.attributes["gen_ai.conversation.id"] == t.session(alice()).session_id
    assert turn.attributes["turnlog.platform"] == "telegram"
    # Telegram ids are hashed in the context prompt, so in traces too: the key names no raw id.
    key = turn.attributes["turnlog.routing_key"]
    assert key.startswith("agent:main:telegram:dm:") and "42" not in key.split(":")


def test_a_turn_run_from_the_queue_is_one_span_tree(make_turnlog):
    t, exporter = traced(make_turnlog)
    t.accept(BOB, "first")
    t.accept(BOB, "second")
    exporter.clear()
    t.run_next(BOB, echo, collect([]))
    spans = exporter.get_finished_spans()
    assert tree(spans)["lease"] == "routing"  # routed with its start: the lease was free
    assert tree(spans)["agent"] == "turn" and tree(spans)["send"] == "turn"
    turn = next(s for s in spans if s.name == "turn")
    assert turn.attributes["turnlog.routing_key"] == t.routing_key(BOB)  # Slack ids are not hashed
    assert turn.attributes["gen_ai.conversation.id"] == t.session(BOB).session_id


def test_a_refused_repeat_is_a_turn_span_that_says_so(make_turnlog):
    t, exporter = traced(make_turnlog)
    t.handle_message(alice("m1"), "hello", echo, collect([]))
    exporter.clear()
    t.handle_message(alice("m1"), "hello", echo, collect([]))
    spans = exporter.get_finished_spans()
    assert tree(spans)["routing"] == "turn" and not {"agent", "send"} & set(tree(spans))  # never run
    turn = next(s for s in spans if s.name == "turn")
    assert turn.attributes["turnlog.duplicate"] == "message_id"
