"""Reads of the delivery ledger's table (`deliveries`: ledger.py), as typed rows. Each function
only reads the read-model connection it is given."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ..domain.delivery import OWED_STATES
from .base import TypedRow


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
    words_position: int | None  # the transcript message it refers to, when the ledger saw it


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
    state: str  # pending, attempting, delivered, failed, unknown, dead or abandoned
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
        del fields["recorded_position"], fields["words_position"]
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


_SQLITE_MAX_INT = 2**63 - 1  # a limit past what SQLite binds is more rows than any table holds: all


def ledger(db: sqlite3.Connection, status: str | None = None, limit: int | None = None,
           ids: tuple[str, ...] | None = None) -> list[DeliveryRow]:
    """The ledger's rows, oldest first; only `status`'s (and those of `ids`), and at most `limit` (None: all)."""
    clauses, params = (["state=?"], [status]) if status else ([], [])
    if ids is not None:
        clauses.append(f"delivery_id IN ({', '.join('?' * len(ids))})")
        params += ids
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    rows = db.execute(
        "SELECT delivery_id, session_id, seq, session_key, platform, chat_id, thread_id, state, attempts,"
        f" owner, recovered, last_error, created_at, updated_at, recorded_position, words_position FROM deliveries {where}"
        " ORDER BY created_at, session_id, seq LIMIT ?",
        (*params, -1 if limit is None or limit > _SQLITE_MAX_INT else limit)).fetchall()
    return [DeliveryRow(*r[:10], bool(r[10]), *r[11:]) for r in rows]  # type: ignore[call-arg, misc]


def owed(db: sqlite3.Connection, states: tuple[str, ...] = OWED_STATES) -> list[OwedDelivery]:
    """Deliveries still owed (pending, attempting, failed or unknown; or those of `states`), oldest first."""
    marks = ", ".join("?" * len(states))
    return [OwedDelivery(*r) for r in db.execute(
        "SELECT delivery_id, session_id, seq, platform, chat_id, state, attempts, owner FROM deliveries"
        f" WHERE state IN ({marks}) ORDER BY created_at, session_id, seq", states)]


def state_counts(db: sqlite3.Connection) -> dict[str, int]:
    """How many deliveries the ledger holds in each state."""
    return dict(db.execute("SELECT state, COUNT(*) FROM deliveries GROUP BY state").fetchall())
