"""What a read model is: tables it owns, the events it reads, and how one event changes it."""

from __future__ import annotations

import sqlite3
from typing import Any, Protocol


class Projection(Protocol):
    name: str
    topics: tuple[str, ...]  # the event topics it reads; others are skipped cheaply
    tables: tuple[str, ...]  # the tables it owns, dropped and rebuilt together

    def create(self, db: sqlite3.Connection) -> None: ...

    def apply(self, db: sqlite3.Connection, event: Any, position: int) -> None: ...


def topic_of(event: Any) -> str:
    return type(event).TOPIC


def event_name(topic: str) -> str:
    return topic.split(":", 1)[-1]
