"""The event log read in commit order: what the checker and the tests judge by.

Reads the stored events through the library's recorder and mapper, never the read models, so a
projection bug cannot hide a recovery bug (and `rebuild` cannot change what is read here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from turnlog import Turnlog

BATCH = 1000


@dataclass(frozen=True)
class Logged:
    position: int
    topic: str  # e.g. "turnlog:LeaseRevoked"
    event: Any

    @property
    def name(self) -> str:
        return self.topic.split(":", 1)[1]

    def __getattr__(self, item: str) -> Any:
        return getattr(self.event, item)


def iter_events(t: Turnlog, topics: Iterable[str] = ()) -> Iterator[Logged]:
    wanted = [x if ":" in x else f"turnlog:{x}" for x in topics]
    start = 1
    while True:
        batch = t._app.recorder.select_notifications(start, BATCH, topics=wanted)
        for n in batch:
            yield Logged(n.id, n.topic, t._app.mapper.to_domain_event(n))
        if len(batch) < BATCH:
            return
        start = batch[-1].id + 1


def events(t: Turnlog, *topics: str) -> list[Logged]:
    return list(iter_events(t, topics))


def event_count(t: Turnlog) -> int:
    return t._app.recorder.max_notification_id() or 0
