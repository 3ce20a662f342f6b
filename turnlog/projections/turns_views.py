"""Reads of the turn projections' tables (`deliveries`, `inboxes`, `queue_items`, `leases`:
turns.py), as typed rows. Each function only reads the read-model connection it is given."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

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
class DeliveryRow(TypedRow):
    """A delivery of the ledger as its read model holds it (its content stays in the log)."""
    delivery_id: str
    session_id: str
    seq: int
    session_key: str | None
    platform: str | None
    chat_id: str | None
    thread_id: str | None
    state: str
    attempts: int
    owner: str | None
    recovered: bool
    last_error: str | None
    created_at: str
    updated_at: str
    recorded_position: int  # the DeliveryRecorded event: its content is read from the log


@dataclass(frozen=True)
class LedgerEntry(TypedRow):
    """A delivery of the ledger with the reply it owes: what `Turnlog.ledger` lists."""
    delivery_id: str
    session_id: str
    seq: int
    session_key: str | None
    platform: str | None
    chat_id: str | None
    thread_id: str | None
    state: str  # pending, attempting, delivered, failed or abandoned
    attempts: int
    owner: str | None  # who made the last attempt
    recovered: bool  # owed by a boot that died, found by recovery
    last_error: str | None
    created_at: str
    updated_at: str
    content: str

    @classmethod
    def of(cls, row: DeliveryRow, content: str) -> "LedgerEntry":
        fields = row.to_dict()
        del fields["recorded_position"]
        return cls(**fields, content=content)


@dataclass(frozen=True)
class OwedDelivery(TypedRow):
    """A delivery not yet delivered nor abandoned."""
    delivery_id: str
    session_id: str
    seq: int
    platform: str | None
    chat_id: str | None
    state: str
    attempts: int
    owner: str | None


@dataclass(frozen=True)
class LeaseRow(TypedRow):
    """A held turn lease: who holds it, under which epoch, until when."""
    session_id: str
    owner: str
    owner_key: str | None
    epoch: int
    turn_id: str | None
    acquired_at: str | None
    expires_at: str | None


@dataclass(frozen=True)
class ItemRef(TypedRow):
    """Where an inbound item lives: its inbox aggregate and its id there."""
    inbox_id: str
    item_id: str


def queue(db: sqlite3.Connection, route_ids: Sequence[str]) -> list[QueueItemRow]:
    """Items waiting (or running) for these routes, oldest first."""
    marks = ",".join("?" * len(route_ids))
    rows = db.execute(
        "SELECT q.item_id, q.session_key, q.kind, q.text, q.message_ids, q.state, q.session_id, q.accepted_at"
        f" FROM queue_items q JOIN inboxes i ON i.inbox_id = q.inbox_id WHERE i.route_id IN ({marks})"
        " AND q.state IN ('pending', 'started') ORDER BY q.accepted_at, CAST(q.item_id AS INTEGER)",
        tuple(route_ids)).fetchall()
    return [QueueItemRow(*r[:4], orjson.loads(r[4]), *r[5:]) for r in rows]  # type: ignore[call-arg, misc]


def ledger(db: sqlite3.Connection, status: str | None = None) -> list[DeliveryRow]:
    where, params = ("WHERE state=?", (status,)) if status else ("", ())
    rows = db.execute(
        "SELECT delivery_id, session_id, seq, session_key, platform, chat_id, thread_id, state, attempts,"
        f" owner, recovered, last_error, created_at, updated_at, recorded_position FROM deliveries {where}"
        " ORDER BY created_at, session_id, seq", params).fetchall()
    return [DeliveryRow(*r[:10], bool(r[10]), *r[11:]) for r in rows]  # type: ignore[call-arg, misc]


def owed(db: sqlite3.Connection) -> list[OwedDelivery]:
    """Deliveries still owed (pending, attempting or failed), oldest first."""
    return [OwedDelivery(*r) for r in db.execute(
        "SELECT delivery_id, session_id, seq, platform, chat_id, state, attempts, owner FROM deliveries"
        " WHERE state IN ('pending', 'attempting', 'failed') ORDER BY created_at, session_id, seq")]


def held_leases(db: sqlite3.Connection) -> list[LeaseRow]:
    return [LeaseRow(*r) for r in db.execute(
        "SELECT session_id, owner, owner_key, epoch, turn_id, acquired_at, expires_at FROM leases"
        " WHERE owner IS NOT NULL ORDER BY acquired_at")]


def sessions_held_by(db: sqlite3.Connection, owners: Iterable[str]) -> list[str]:
    owners = list(owners)
    if not owners:
        return []
    marks = ",".join("?" * len(owners))
    return [r[0] for r in db.execute(
        f"SELECT session_id FROM leases WHERE owner IN ({marks}) ORDER BY session_id", owners)]


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


@dataclass(frozen=True)
class QueueDepth(TypedRow):
    session_key: str
    pending: int
    started: int


def queue_depths(db: sqlite3.Connection) -> list[QueueDepth]:
    """Per routing key with items waiting or running: how many of each."""
    return [QueueDepth(*r) for r in db.execute(
        "SELECT session_key, SUM(state='pending'), SUM(state='started') FROM queue_items"
        " WHERE state IN ('pending', 'started') GROUP BY session_key ORDER BY session_key")]
