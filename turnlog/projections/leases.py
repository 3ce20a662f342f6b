"""The turn leases' read model: each session's lease, its holder and epoch (its queries: leases_views.py)."""

from __future__ import annotations

from typing import Any, Callable

from .base import Rows, Tables


_LEASE_COLUMNS = ("lease_id", "session_id", "epoch", "owner", "owner_key", "turn_id", "acquired_at", "expires_at",
                  "last_seq", "last_outcome", "position")


def _lease_ended(row: dict[str, Any], e: dict[str, Any]) -> None:
    outcome = e.get("outcome") or e.get("reason") or "moved"
    row.update(owner=None, turn_id=None, expires_at=None, last_outcome=outcome)
    if e.get("last_seq") is not None:  # a revocation that wrote messages with it (version 2)
        row.update(last_seq=e["last_seq"])


_LEASE_CHANGES: dict[str, Callable[[dict[str, Any], dict[str, Any]], None]] = {
    "turnlog:LeaseAcquired": lambda row, e: row.update(
        epoch=e["epoch"], owner=e["owner"], owner_key=e["owner_key"], turn_id=e["turn_id"],
        acquired_at=e["timestamp"], expires_at=e["expires_at"],
        # an acquisition that starts a turn reserves its first message's seq (version 2)
        **({"last_seq": e["last_seq"]} if e.get("last_seq") is not None else {})),
    "turnlog:LeaseSeeded": lambda row, e: row.update(last_seq=e["last_seq"]),
    "turnlog:LeaseRenewed": lambda row, e: row.update(expires_at=e["expires_at"], last_seq=e["last_seq"]),
    "turnlog:LeaseReleased": _lease_ended,
    "turnlog:LeaseRevoked": _lease_ended,
    "turnlog:LeaseMoved": _lease_ended,
}


class LeasesProjection:
    name = "leases"
    weight = 2.2  # rebuild cost relative to the others (parallel.py)
    tables = ("leases",)
    topics = ("turnlog:LeaseOpened", *_LEASE_CHANGES)

    def create(self, t: Tables) -> None:
        t.execute(
            """CREATE TABLE IF NOT EXISTS {leases} (
                lease_id TEXT PRIMARY KEY,
                session_id TEXT NOT NULL,
                epoch INTEGER NOT NULL,
                owner TEXT,
                owner_key TEXT,
                turn_id TEXT,
                acquired_at TEXT,
                expires_at TEXT,
                last_seq INTEGER NOT NULL,
                last_outcome TEXT,
                position INTEGER NOT NULL)"""
        )

    def create_indexes(self, t: Tables) -> None:
        t.execute("CREATE INDEX IF NOT EXISTS leases_by_session ON {leases} (session_id)")

    def writer(self, t: Tables) -> "_LeasesWriter":
        return _LeasesWriter(t)


class _LeasesWriter:
    buffers = True  # apply() only reads; it writes in flush()

    def __init__(self, t: Tables) -> None:
        self.rows = Rows(t, "leases", _LEASE_COLUMNS, "lease_id")

    def apply_fields(self, topic: str, e: dict[str, Any], position: int) -> None:
        ident = e["originator_id"]
        if topic == "turnlog:LeaseOpened":
            self.rows.new(ident, session_id=e["session_id"], epoch=0, last_seq=0, position=position)
            return
        row = self.rows.get(ident)
        if row is not None:
            _LEASE_CHANGES[topic](row, e)
            row["position"] = position

    def flush(self) -> None:
        self.rows.flush()
