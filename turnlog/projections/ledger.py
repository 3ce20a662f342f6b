"""The delivery ledger's read model: each reply owed and its delivery state (its queries: ledger_views.py)."""

from __future__ import annotations

from typing import Any, Callable

from .base import Rows, Tables


_DELIVERY_COLUMNS = ("delivery_id", "session_id", "seq", "session_key", "platform", "chat_id", "thread_id",
                     "recorded_position", "state", "attempts", "owner", "recovered", "last_error", "created_at",
                     "updated_at", "position")

# How each event changes a row, given the event's fields (LogReader.fields).
_DELIVERY_CHANGES: dict[str, Callable[[dict[str, Any], dict[str, Any]], None]] = {
    "turnlog:DeliveryAttempting": lambda row, e: row.update(
        state="attempting", attempts=e["attempt"], owner=e["owner"], recovered=int(e["recovered"])),
    "turnlog:DeliveryDelivered": lambda row, e: row.update(state="delivered"),
    "turnlog:DeliveryFailed": lambda row, e: row.update(state="failed", last_error=e["error"]),
    "turnlog:DeliveryMarkedUnsure": lambda row, e: row.update(
        state="unknown", last_error="recovered after an unclean restart"),
    "turnlog:DeliveryOutcomeUnknown": lambda row, e: row.update(state="unknown", last_error=e["error"]),
    "turnlog:DeliveryReconciled": lambda row, e: row.update(
        state={"delivered": "delivered", "not_delivered": "failed"}.get(e["verdict"], row["state"])),
    "turnlog:DeliveryDeadLettered": lambda row, e: row.update(
        state="dead", last_error=row["last_error"] if row["last_error"] is not None else e["reason"]),
    "turnlog:DeliveryRetried": lambda row, e: row.update(state="failed"),
    "turnlog:DeliveryAbandoned": lambda row, e: row.update(
        state="abandoned", last_error=row["last_error"] if row["last_error"] is not None else e["reason"]),
}


class LedgerProjection:
    """Each reply owed and its delivery state. The reply's text stays in the log: a row names
    the position of its DeliveryRecorded event (`recorded_position`), where the ledger's
    readers find it (a copy here was nine tenths of the table)."""

    name = "ledger"
    weight = 2.8  # rebuild cost relative to the others (parallel.py)
    version = 3  # 2: the reply's text is read from the log, not copied; 3: unknown and dead rows
    tables = ("deliveries",)
    topics = ("turnlog:DeliveryRecorded", *_DELIVERY_CHANGES)

    def create(self, t: Tables) -> None:
        t.execute(
            """CREATE TABLE IF NOT EXISTS {deliveries} (
                delivery_id TEXT PRIMARY KEY,
                session_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                session_key TEXT,
                platform TEXT,
                chat_id TEXT,
                thread_id TEXT,
                recorded_position INTEGER NOT NULL,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL,
                owner TEXT,
                recovered INTEGER NOT NULL DEFAULT 0,
                last_error TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                position INTEGER NOT NULL)"""
        )

    def create_indexes(self, t: Tables) -> None:
        t.execute("CREATE INDEX IF NOT EXISTS deliveries_by_state ON {deliveries} (state, created_at)")

    def writer(self, t: Tables) -> "_LedgerWriter":
        return _LedgerWriter(t)


class _LedgerWriter:
    buffers = True  # apply() only reads; it writes in flush()

    def __init__(self, t: Tables) -> None:
        self.rows = Rows(t, "deliveries", _DELIVERY_COLUMNS, "delivery_id")

    def apply_fields(self, topic: str, e: dict[str, Any], position: int) -> None:
        ident = e["originator_id"]
        at = e["timestamp"]
        if topic == "turnlog:DeliveryRecorded":
            self.rows.new(ident, session_id=e["session_id"], seq=e["seq"], session_key=e["session_key"],
                          platform=e["platform"], chat_id=e["chat_id"], thread_id=e["thread_id"],
                          recorded_position=position, state="pending", attempts=0, recovered=0, created_at=at,
                          updated_at=at, position=position)
            return
        row = self.rows.get(ident)
        if row is not None:
            _DELIVERY_CHANGES[topic](row, e)
            row.update(updated_at=at, position=position)

    def flush(self) -> None:
        self.rows.flush()
