"""What every command handler needs: the application, the clock, ids and settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError

from ..clock import Clock, SessionIdFactory
from ..config import EngineConfig
from ..domain.base import stream_id
from ..domain.session import Session
from ..errors import ConflictError
from .store import TurnlogApplication

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

    def get(self, aggregate_id: UUID) -> Any | None:
        try:
            return self.app.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None

    def session(self, session_id: str) -> Session | None:
        return self.get(session_aggregate_id(session_id))

    def save(self, *items: Any) -> int:
        """Save in one transaction; returns the log position of the last event written."""
        recordings = self.app.save(*items)
        return recordings[-1].notification.id if recordings else 0

    def retrying(self, attempt: Callable[[], T], what: str) -> T:
        """Run a decide-and-save step again from fresh state when another writer got there first."""
        for _ in range(MAX_CONFLICT_RETRIES):
            try:
                return attempt()
            except IntegrityError:
                continue
        raise ConflictError(f"{what}: lost {MAX_CONFLICT_RETRIES} concurrent-update races in a row")
