"""What every turnlog aggregate and event shares: explicit topics, an actor and a cause.

Events are the public record. Each one says who acted (a platform user, `cli`, `system:policy`,
...) and why (the inbound message, command or rule that caused it), and carries the time the
injected clock gave, so that a replay reproduces the same history.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar, dataclass_transform
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, DomainEvent

from .keys import TURNLOG_NAMESPACE

A = TypeVar("A", bound="TurnlogAggregate")


@lru_cache(maxsize=65536)
def stream_id(kind: str, name: str) -> UUID:
    """The deterministic id of a per-session or per-key stream, e.g. ("lease", session_id)."""
    return uuid5(TURNLOG_NAMESPACE, f"{kind}:{name}")


class TurnlogAggregate(Aggregate):
    """Subclasses give themselves and every event class an explicit TOPIC (a stable public name
    that survives moving the code), and name their creation event class `Created`."""

    class Event(Aggregate.Event):
        actor: str
        cause: str

    class Created(Event, Aggregate.Created):
        pass

    @classmethod
    def new(cls: type[A], event_class: type, *, id: UUID, at: datetime, **fields: Any) -> A:
        return cls._create(event_class, id=id, timestamp=at, **fields)

    def clone(self: A) -> A:
        """A copy that can be changed without touching this one.

        Cheap because apply methods never change a container in place: they replace it.
        """
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other._pending_events = []
        return other

    @property
    def settled(self) -> bool:
        """True once no command changes it any more (a finished delivery, a first sighting)."""
        return False

    def record(self, event_class: type, *, at: datetime, **fields: Any) -> None:
        self.trigger_event(event_class, timestamp=at, **fields)


@dataclass_transform(frozen_default=True)
class StreamEvent(DomainEvent):
    """An event of a stream that is not an aggregate's (a transcript, an import record).

    eventsourcing makes every event class a frozen dataclass through its metaclass, which type
    checkers cannot see; this base says so, so that their constructors' fields are checked."""
