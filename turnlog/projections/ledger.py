"""Read models of turns: the delivery ledger, the inbound queue and lease holders (transcripts: search.py)."""

from __future__ import annotations

from typing import Any, Callable

import orjson

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
        state="failed", last_error="recovered after an unclean restart"),
    "turnlog:DeliveryAbandoned": lambda row, e: row.update(
        state="abandoned", last_error=row["last_error"] if row["last_error"] is not None else e["reason"]),
}


class LedgerProjection:
    """Each reply owed and its delivery state. The reply's text stays in the log: a row names
    the position of its DeliveryRecorded event (`recorded_position`), where the ledger's
    readers find it (a copy here was nine tenths of the table)."""

    name = "ledger"
    weight = 2.8  # rebuild cost relative to the others (parallel.py)
    version = 2  # 2: the reply's text is read from the log, not copied
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


_ITEM_COLUMNS = ("inbox_id", "item_id", "session_key", "kind", "text", "message_ids", "state", "session_id", "turn_id",
                 "outcome", "accepted_at", "updated_at", "position")


class QueueProjection:
    name = "queue"
    version = 2  # 2: a finished item (completed, dropped) leaves the table: only waiting and started ones are read
    weight = 3.3  # rebuild cost relative to the others (parallel.py)
    tables = ("queue_items", "inboxes")
    topics = ("turnlog:InboxOpened", "turnlog:InboundAccepted", "turnlog:InboundStarted",
              "turnlog:InboundCompleted", "turnlog:InboundDropped", "turnlog:InboundRejected")

    def create(self, t: Tables) -> None:
        t.execute("CREATE TABLE IF NOT EXISTS {inboxes} (inbox_id TEXT PRIMARY KEY, route_id TEXT, session_key TEXT)")
        t.execute(
            """CREATE TABLE IF NOT EXISTS {queue_items} (
                inbox_id TEXT NOT NULL,
                item_id TEXT NOT NULL,
                session_key TEXT NOT NULL,
                kind TEXT NOT NULL,
                text TEXT NOT NULL,
                message_ids TEXT NOT NULL,
                state TEXT NOT NULL,
                session_id TEXT,
                turn_id TEXT,
                outcome TEXT,
                accepted_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                position INTEGER NOT NULL,
                PRIMARY KEY (inbox_id, item_id))"""
        )

    def create_indexes(self, t: Tables) -> None:
        t.execute("CREATE INDEX IF NOT EXISTS queue_by_key ON {queue_items} (session_key, state)")

    def writer(self, t: Tables) -> "_QueueWriter":
        return _QueueWriter(t)


class _QueueWriter:
    buffers = True  # apply() only reads; it writes in flush()

    def __init__(self, t: Tables) -> None:
        self.inboxes = Rows(t, "inboxes", ("inbox_id", "route_id", "session_key"), "inbox_id")
        self.items = Rows(t, "queue_items", _ITEM_COLUMNS, ("inbox_id", "item_id"))

    def apply_fields(self, topic: str, e: dict[str, Any], position: int) -> None:
        inbox = e["originator_id"]
        at = e["timestamp"]
        if topic == "turnlog:InboxOpened":
            self.inboxes.new(inbox, route_id=e["route_id"], session_key=e["session_key"])
        elif topic == "turnlog:InboundAccepted":
            if e["merged_into"] is None:
                key = self.inboxes.get(inbox)["session_key"]  # type: ignore[index]
                self.items.new((inbox, e["item_id"]), session_key=key, kind=e["kind"], text=e["text"],
                               message_ids=orjson.dumps([e["message_id"]]).decode(), state="pending",
                               accepted_at=at, updated_at=at, position=position)
            else:
                row = self.items.get((inbox, e["merged_into"]))
                if row is not None:
                    ids = orjson.loads(row["message_ids"]) + [e["message_id"]]
                    row.update(text=row["text"] + "\n" + e["text"], message_ids=orjson.dumps(ids).decode(),
                               updated_at=at, position=position)
        elif topic == "turnlog:InboundStarted":
            self._change(inbox, e["item_id"], at, position, state="started", session_id=e["session_id"],
                         turn_id=e["turn_id"])
        elif topic == "turnlog:InboundCompleted":
            self.items.remove((inbox, e["item_id"]))  # the log keeps it; nothing reads a finished item here
        elif topic == "turnlog:InboundDropped":
            for item_id in e["item_ids"]:
                self.items.remove((inbox, item_id))

    def _change(self, inbox: str, item_id: str, at: str, position: int, **values: Any) -> None:
        row = self.items.get((inbox, item_id))
        if row is not None:
            row.update(values, updated_at=at, position=position)

    def flush(self) -> None:
        self.inboxes.flush()
        self.items.flush()


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
