"""What every command handler needs: the application, the clock, ids and settings."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar, cast
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, project_aggregate
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError

from ..clock import Clock, SessionIdFactory
from ..config import EngineConfig
from ..domain.base import TurnlogAggregate, stream_id
from ..domain.session import Session
from ..errors import ConflictError, ReadOnlyDatabase
from .store import TurnlogApplication

T = TypeVar("T")
MAX_CONFLICT_RETRIES = 50
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
            return project_aggregate(None, events)
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


def _key(aggregate_id: Any) -> int:
    return aggregate_id.int if type(aggregate_id) is UUID else UUID(str(aggregate_id)).int


def session_aggregate_id(session_id: str) -> UUID:
    return stream_id("session", session_id)


@dataclass
class CommandContext:
    app: TurnlogApplication
    clock: Clock
    new_session_id: SessionIdFactory
    config: EngineConfig
    cache: AggregateCache = field(init=False)
    read_only: bool = False  # a read-only open (api.Turnlog): every save is refused before it is tried

    def __post_init__(self) -> None:
        self.cache = AggregateCache(self.app)

    def get(self, aggregate_id: UUID, fresh: bool = True) -> Any | None:
        """fresh=False only where a save of this aggregate follows (see AggregateCache)."""
        return self.cache.get(aggregate_id, fresh)

    def session(self, session_id: str, fresh: bool = True) -> Session | None:
        return self.get(session_aggregate_id(session_id), fresh)

    def save(self, *items: Any) -> int:
        """Save in one transaction; returns the log position of the last event written."""
        if self.read_only:
            raise ReadOnlyDatabase("this turnlog database is open read-only: the change was not recorded")
        try:
            recordings = self.app.save(*items)
        except IntegrityError:
            for item in items:
                if isinstance(item, Aggregate):
                    self.cache.forget(item.id)
            raise
        for item in items:
            if isinstance(item, TurnlogAggregate):
                if item.settled:
                    # Two of these a turn (its delivery, its message id's first sighting) would
                    # push the keys' routes, sessions, inboxes and leases out of the cache; a
                    # rare later read of one finds it in the log.
                    self.cache.forget(item.id)
                else:
                    self.cache.put(item.clone())
        return recordings[-1].notification.id if recordings else 0

    def retrying(self, attempt: Callable[[], T], what: str) -> T:
        """Run a decide-and-save step again from fresh state when another writer got there first."""
        for _ in range(MAX_CONFLICT_RETRIES):
            try:
                return attempt()
            except IntegrityError:
                continue
        raise ConflictError(f"{what}: lost {MAX_CONFLICT_RETRIES} concurrent-update races in a row")
