"""Reads of the inbound queue's tables (`inboxes`, `queue_items`: queue.py), as typed rows. Each
function only reads the read-model connection it is given."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any, Sequence

import orjson

from .base import TypedRow


@dataclass(frozen=True)
class QueueItemRow(TypedRow):
    """An inbound item of a routing key: waiting (`pending`) or running; `kind` human, queued or wakeup."""
    item_id: str
    session_key: str
    kind: str
    text: str
    message_ids: list[Any]
    state: str
    session_id: str | None
    accepted_at: str


@dataclass(frozen=True)
class ItemRef(TypedRow):
    """Where an inbound item lives: its inbox aggregate and its id there."""
    inbox_id: str
    item_id: str


@dataclass(frozen=True)
class QueueDepth(TypedRow):
    session_key: str
    pending: int
    started: int


def queue(db: sqlite3.Connection, route_ids: Sequence[str]) -> list[tuple[QueueItemRow, int | None]]:
    """Items waiting (or running) for these routes, oldest first, each with the seq of its
    session's message that holds its words when its `text` is not its own (accepted and started
    at once: the reader reads them with domain/inbox.py texts_of)."""
    marks = ",".join("?" * len(route_ids))
    rows = db.execute(
        "SELECT q.item_id, q.session_key, q.kind, q.text, q.message_ids, q.state, q.session_id, q.accepted_at,"
        f" q.text_seq FROM queue_items q JOIN inboxes i ON i.inbox_id = q.inbox_id WHERE i.route_id IN ({marks})"
        " AND q.state IN ('pending', 'started') ORDER BY q.accepted_at, CAST(q.item_id AS INTEGER)",
        tuple(route_ids)).fetchall()
    return [(QueueItemRow(*r[:4], orjson.loads(r[4]), *r[5:8]), r[8]) for r in rows]  # type: ignore[call-arg, misc]


def item_of_turn(db: sqlite3.Connection, turn_id: str) -> ItemRef | None:
    row = db.execute("SELECT inbox_id, item_id FROM queue_items WHERE turn_id=?", (turn_id,)).fetchone()
    return ItemRef(*row) if row else None


def started_item(db: sqlite3.Connection, session_id: str) -> ItemRef | None:
    """The latest item started on a session and not completed."""
    row = db.execute("SELECT inbox_id, item_id FROM queue_items WHERE session_id=? AND state='started'"
                     " ORDER BY position DESC LIMIT 1", (session_id,)).fetchone()
    return ItemRef(*row) if row else None


def inboxes_with_pending(db: sqlite3.Connection) -> list[str]:
    """Inboxes with items waiting, the one waiting longest first."""
    return [r[0] for r in db.execute(
        "SELECT q.inbox_id FROM queue_items q WHERE q.state='pending' GROUP BY q.inbox_id ORDER BY MIN(q.position)")]


def queue_depths(db: sqlite3.Connection) -> list[QueueDepth]:
    """Per routing key with items waiting or running: how many of each."""
    return [QueueDepth(*r) for r in db.execute(
        "SELECT session_key, SUM(state='pending'), SUM(state='started') FROM queue_items"
        " WHERE state IN ('pending', 'started') GROUP BY session_key ORDER BY session_key")]
