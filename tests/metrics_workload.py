"""A scripted gateway workload for the metrics tests (engine, web, CLI): answered turns, a
repeated message, a failed send and a dead-lettered one; and what the log holds after it, read
from the log itself (harness.log), never through the read models the metrics read."""

from __future__ import annotations

from collections import Counter
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from harness.log import events
from turnlog import SessionSource, Turnlog

from chat import alice, collect, echo

CAROL = SessionSource(platform="telegram", chat_type="dm", chat_id="77", user_id="77")


def refuse(text: str) -> None:
    raise ConnectionRefusedError("the platform refused the connection")  # before anything was sent


def run_workload(t: Turnlog) -> list[str]:
    """Three answered turns (one of them failed to send, then dead-lettered by the sweep), and a repeat."""
    sent: list[str] = []
    t.start_gateway("main")
    t.handle_message(alice("m1"), "hello", echo, collect(sent))
    t.handle_message(alice("m1"), "hello", echo, collect(sent))  # a redelivery: refused
    t.handle_message(alice("m2"), "and again", echo, collect(sent))
    t.handle_message(CAROL, "anyone?", echo, refuse)
    t.sweep_deliveries(lambda target, text: refuse(text))  # its last attempt: dead
    return sent


def logged(t: Turnlog) -> dict[str, Any]:
    """The counts the log holds, by reading its events (and the ledger's rows)."""
    return {
        # a start: an InboundStarted, or an accept that started its turn at once (version 2)
        "started": len(events(t, "InboundStarted")) + sum(e.turn_id is not None for e in events(t, "InboundAccepted")),
        "ended": Counter(e.outcome for e in events(t, "InboundCompleted")),
        "refused": Counter(e.reason for e in events(t, "InboundDuplicateRefused")),
        "deliveries": Counter(row.state for row in t.ledger()),
    }


def samples(exposition: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The samples of a text exposition: (name, sorted labels) -> value."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(exposition) for s in family.samples}


def scraped(exposition: str) -> dict[str, Any]:
    """The same counts as `logged`, read from a scrape."""
    got = samples(exposition)

    def by(name: str, label: str) -> Counter:
        return Counter({dict(labels)[label]: int(v) for (n, labels), v in got.items() if n == name and v})
    return {
        "started": int(got[("turnlog_turns_started_total", ())]),
        "ended": by("turnlog_turns_ended_total", "outcome"),
        "refused": by("turnlog_duplicates_refused_total", "reason"),
        "deliveries": by("turnlog_deliveries", "state"),
    }
