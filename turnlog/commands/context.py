"""What every command handler needs: the application, the clock, ids and settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar
from uuid import UUID

from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError

from ..clock import Clock, SessionIdFactory
from ..config import EngineConfig
from ..domain.base import TurnlogAggregate, stream_id
from ..domain.session import Session
from ..errors import ConflictError, ReadOnlyDatabase
from ..storage.aggregates import AggregateCache
from ..storage.store import TurnlogApplication
from .recorder import Recorder

T = TypeVar("T")
MAX_CONFLICT_RETRIES = 50


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
    recorder: Recorder = field(default_factory=lambda: Recorder(""))  # what this process measures

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
