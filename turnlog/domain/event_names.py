"""The names of turnlog's events (a topic "turnlog:RouteBound" is named RouteBound): what an
audit's type filter may ask for. An unknown name is refused rather than matching nothing, so a
typo is not read as "no such events happened"."""

from __future__ import annotations

from eventsourcing.domain import DomainEvent

PREFIX = "turnlog:"


def event_names() -> frozenset[str]:
    """Every event class's name, from the classes loaded (the engine loads them all; read afresh,
    a walk of about a hundred classes)."""
    names: set[str] = set()
    pending: list[type] = [DomainEvent]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        topic = cls.__dict__.get("TOPIC")
        if isinstance(topic, str) and topic.startswith(PREFIX):
            names.add(topic[len(PREFIX):])
    return frozenset(names)


def unknown_event_names(names: list[str]) -> list[str]:
    known = event_names()
    return [name for name in names if name not in known]
