"""The delivery ledger's read model: each reply owed and its delivery state (its queries: ledger_views.py)."""

from __future__ import annotations

from typing import Any, Callable

from ..domain.transcript import transcript_id
from .base import Rows, Tables


_DELIVERY_COLUMNS = ("delivery_id", "session_id", "seq", "session_key", "platform", "chat_id", "thread_id",
                     "recorded_position", "words_position", "state", "attempts", "owner", "recovered", "last_error",
                     "created_at", "updated_at", "position")
_RECORDED = "turnlog:DeliveryRecorded"
_MESSAGE = "turnlog:MessageAppended"
# Messages remembered for the deliveries that refer to them: a reply's message is saved in the
# delivery's own transaction, so it is among the last few read.
_MESSAGES_REMEMBERED = 4096
_MESSAGE_LOOKBACK = 64  # positions before a delivery its message may be at (a rich reply's usage events between)

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
    the position of its DeliveryRecorded event (`recorded_position`), and, when that event
    refers to its transcript message, the message's (`words_position`, NULL when it was not
    seen), where the ledger's readers find the words of a page of rows in one read (a copy here
    was nine tenths of the table). Transcript messages are read only as raw rows (their
    stream, version and position), never decoded."""

    name = "ledger"
    weight = 2.8  # rebuild cost relative to the others (parallel.py)
    # 2: the reply's text is read from the log, not copied; 3: unknown and dead rows; 4: the
    # position of the transcript message a delivery's words are
    version = 4
    tables = ("deliveries",)
    topics = (_RECORDED, _MESSAGE, *_DELIVERY_CHANGES)

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
                words_position INTEGER,
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
    buffers = True  # apply_rows() only reads; it writes in flush()

    def __init__(self, t: Tables) -> None:
        self.rows = Rows(t, "deliveries", _DELIVERY_COLUMNS, "delivery_id")
        self.messages: dict[tuple[str, int], int] = {}  # (transcript stream, seq) -> position
        self.log: Any = None  # the log the rows come from (apply_rows)

    def apply_rows(self, rows: list[Any], decoded: list[Any], log: Any) -> None:
        self.log = log
        for row, fields in zip(rows, decoded):
            if row[3] == _MESSAGE:
                self._remember_message(log.stream_of(row), row[2], row[0])
            else:
                self.apply_fields(row[3], fields or log.fields(row), row[0])

    def _remember_message(self, stream: str, seq: int, position: int) -> None:
        if len(self.messages) >= _MESSAGES_REMEMBERED:
            self.messages.clear()
        self.messages[(stream, seq)] = position

    def _message_position(self, stream: str, seq: int, recorded: int) -> int | None:
        """The position of a delivery's transcript message: remembered from this pass, else (a
        pass that began between the two: a resumed rebuild, a catch-up's first batch) looked up
        in the log among the few positions before the delivery, where the reply's own
        transaction put it. So the read model does not depend on where batches fell."""
        known = self.messages.pop((stream, seq), None)
        if known is not None or self.log is None:
            return known
        for row in self.log.stream_rows_between([stream], max(0, recorded - _MESSAGE_LOOKBACK), recorded):
            if row[2] == seq:
                return int(row[0])
        return None

    def apply_fields(self, topic: str, e: dict[str, Any], position: int) -> None:
        ident = e["originator_id"]
        at = e["timestamp"]
        if topic == _RECORDED:
            words = None
            if e["content"] is None:  # its words are its transcript message's
                words = self._message_position(str(transcript_id(e["session_id"])), e["seq"], position)
            recorded = self.rows.new(ident, session_id=e["session_id"], seq=e["seq"], session_key=e["session_key"],
                                     platform=e["platform"], chat_id=e["chat_id"], thread_id=e["thread_id"],
                                     recorded_position=position, words_position=words, state="pending",
                                     attempts=0, recovered=0, created_at=at, updated_at=at, position=position)
            if e.get("attempting_owner") is not None:  # version 4: recorded with its first attempt
                recorded.update(state="attempting", attempts=e["attempt"] or 1, owner=e["attempting_owner"])
            return
        row = self.rows.get(ident)
        if row is not None:
            _DELIVERY_CHANGES[topic](row, e)
            row.update(updated_at=at, position=position)

    def flush(self) -> None:
        self.rows.flush()
