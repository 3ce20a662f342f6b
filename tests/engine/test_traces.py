"""Traces (docs/operations.md "Metrics and traces"): one span per turn, with children for routing,
the lease, the agent call and each send; the session id as gen_ai.conversation.id; the routing key
with its ids hashed where the context prompt hashes them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

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


def test_spans_follow_a_global_provider_set_after_opening(tmp_path):
    """Without an explicit provider spans cost nothing until the application sets OpenTelemetry's
    global provider; from then on they are recorded (a process of its own: the global provider
    can be set once per process)."""
    script = textwrap.dedent(f"""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        import turnlog
        from turnlog import SessionSource
        t = turnlog.open({str(tmp_path / "t.db")!r}, owner="gw")
        source = SessionSource(platform="telegram", chat_id="42", chat_type="dm", user_id="42")
        source.message_id = "m1"
        t.handle_message(source, "before", lambda history, item: "ok", lambda text: None)
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        source.message_id = "m2"
        t.handle_message(source, "after", lambda history, item: "ok", lambda text: None)
        print(sorted(s.name for s in exporter.get_finished_spans()))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['agent', 'lease', 'routing', 'send', 'turn']"
