"""The inbound queue's read model: each routing key's inbox and its items waiting or running
(its queries: queue_views.py)."""

from __future__ import annotations

from typing import Any

import orjson

from .base import Rows, Tables


_ITEM_COLUMNS = ("inbox_id", "item_id", "session_key", "kind", "text", "message_ids", "state", "session_id", "turn_id",
                 "outcome", "accepted_at", "updated_at", "position", "text_seq")


class QueueProjection:
    name = "queue"
    # 2: a finished item (completed, dropped) leaves the table: only waiting and started ones are read
    # 3: text_seq, the seq of the session's message holding the words of an item accepted and
    # started at once (its `text` is then ''; the reader reads them from the transcript)
    version = 3
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
                text_seq INTEGER,
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
                started = e.get("turn_id") is not None
                self.items.new((inbox, e["item_id"]), session_key=key, kind=e["kind"], text=e["text"] or "",
                               message_ids=orjson.dumps([e["message_id"]]).decode(),
                               state="started" if started else "pending", session_id=e.get("session_id"),
                               turn_id=e.get("turn_id"), text_seq=e.get("seq"), accepted_at=at, updated_at=at,
                               position=position)
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
