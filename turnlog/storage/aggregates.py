"""Aggregates as last saved or loaded by this process, so that a turn's commands read them once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, cast
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError

from .store import TurnlogApplication

CACHE_SIZE = 50_000


class AggregateCache:
    """Aggregates as last saved or loaded by this process.

    Every command validates what it read when it saves: another process's newer events make the
    save fail with an optimistic-concurrency conflict, the conflicting aggregates are forgotten,
    and the command runs again from the log. So a cached read is safe whenever a save follows;
    a decision that saves nothing asks for `fresh=True`, which reads the events newer than the
    cached version. Callers get a copy, so a command that fails half-way cannot corrupt the cache
    (see TurnlogAggregate.clone).
    """

    def __init__(self, app: TurnlogApplication, size: int = CACHE_SIZE) -> None:
        self.app = app
        self.size = size
        # Keyed by the id's int: a UUID's own hash is Python code, run a few dozen times a turn.
        self._items: OrderedDict[int, Any] = OrderedDict()
        self._lock = threading.Lock()
        intervals = getattr(app, "snapshotting_intervals", None) or {}
        self._span = min(intervals.values()) if app.snapshots is not None and intervals else 0

    def get(self, aggregate_id: UUID, fresh: bool = False) -> Any | None:
        key = _key(aggregate_id)
        with self._lock:
            cached = self._items.get(key)
            if cached is not None:
                self._items.move_to_end(key)
        if cached is None:
            aggregate: Any = self._load(aggregate_id)
            if aggregate is None:
                return None
        elif not fresh:
            return cached.clone()
        else:
            aggregate = cached.clone()
            for event in self.app.events.get(aggregate_id, gt=aggregate.version):
                cast(Any, event).mutate(aggregate)
        self.put(aggregate)
        return aggregate.clone()

    def _load(self, aggregate_id: UUID) -> Any | None:
        """The aggregate from the log, None if its stream does not exist. A stream shorter than the
        shortest snapshot interval has no snapshot, so its events alone, read in one query, make
        it (the repository would look for a snapshot first: two queries, also for a stream that
        does not exist, as most look-ups of a key's first message are)."""
        span = self._span
        events = list(self.app.events.get(aggregate_id, limit=span)) if span else []
        if events and len(events) < span and events[0].originator_version == 1:
            # Folded here: the library's project_aggregate checks each event against a runtime
            # Protocol, which costs more than the mutation of a short stream.
            aggregate: Any = None
            for event in cast(list[Any], events):
                aggregate = event.mutate(aggregate)
            return aggregate
        if span and not events:
            return None
        try:
            return self.app.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None

    def put(self, aggregate: Any) -> None:
        key = aggregate.id.int
        with self._lock:
            current = self._items.get(key)
            if current is None:
                self._items[key] = aggregate  # new keys go last
            elif current.version <= aggregate.version:
                self._items[key] = aggregate
                self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def forget(self, aggregate_id: UUID) -> None:
        with self._lock:
            self._items.pop(_key(aggregate_id), None)

    def clear(self) -> None:
        """Forget every aggregate (after an erase: cached ones hold the subject's plaintext)."""
        with self._lock:
            self._items.clear()


def _key(aggregate_id: Any) -> int:
    return aggregate_id.int if type(aggregate_id) is UUID else UUID(str(aggregate_id)).int
