"""Read models of turns: transcripts, the delivery ledger, the inbound queue and lease holders."""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson

from .base import topic_of


def _iso(event: Any) -> str:
    return event.timestamp.isoformat()


class MessagesProjection:
    name = "messages"
    tables = ("messages",)
    topics = ("turnlog:MessageAppended",)

    def create(self, db: sqlite3.Connection) -> None:
        db.execute(
            """CREATE TABLE IF NOT EXISTS messages (
                session_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                role TEXT NOT NULL,
                content TEXT NOT NULL,
                tool_calls TEXT,
                tool_call_id TEXT,
                name TEXT,
                token_count INTEGER,
                finish_reason TEXT,
                platform_message_id TEXT,
                epoch INTEGER NOT NULL,
                turn_id TEXT NOT NULL,
                actor TEXT,
                cause TEXT,
                at TEXT NOT NULL,
                position INTEGER NOT NULL,
                PRIMARY KEY (session_id, seq))"""
        )

    def apply(self, db: sqlite3.Connection, e: Any, position: int) -> None:
        db.execute(
            "INSERT INTO messages VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (e.session_id, e.originator_version, e.role, e.content,
             None if e.tool_calls is None else orjson.dumps(e.tool_calls).decode(), e.tool_call_id, e.name,
             e.token_count, e.finish_reason, e.platform_message_id, e.epoch, e.turn_id, e.actor, e.cause, _iso(e),
             position),
        )


class LedgerProjection:
    name = "ledger"
    tables = ("deliveries",)
    topics = ("turnlog:DeliveryRecorded", "turnlog:DeliveryAttempting", "turnlog:DeliveryDelivered",
              "turnlog:DeliveryFailed", "turnlog:DeliveryMarkedUnsure", "turnlog:DeliveryAbandoned")

    def create(self, db: sqlite3.Connection) -> None:
        db.execute(
            """CREATE TABLE IF NOT EXISTS deliveries (
                delivery_id TEXT PRIMARY KEY,
                session_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                session_key TEXT,
                platform TEXT,
                chat_id TEXT,
                thread_id TEXT,
                content TEXT NOT NULL,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL,
                owner TEXT,
                recovered INTEGER NOT NULL DEFAULT 0,
                last_error TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                position INTEGER NOT NULL)"""
        )
        db.execute("CREATE INDEX IF NOT EXISTS deliveries_by_state ON deliveries (state, created_at)")

    def apply(self, db: sqlite3.Connection, e: Any, position: int) -> None:
        topic = topic_of(e)
        ident = str(e.originator_id)
        if topic == "turnlog:DeliveryRecorded":
            db.execute(
                "INSERT INTO deliveries (delivery_id, session_id, seq, session_key, platform, chat_id, thread_id,"
                " content, state, attempts, created_at, updated_at, position) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (ident, e.session_id, e.seq, e.session_key, e.platform, e.chat_id, e.thread_id, e.content,
                 "pending", 0, _iso(e), _iso(e), position),
            )
        elif topic == "turnlog:DeliveryAttempting":
            db.execute("UPDATE deliveries SET state='attempting', attempts=?, owner=?, recovered=?, updated_at=?,"
                       " position=? WHERE delivery_id=?",
                       (e.attempt, e.owner, int(e.recovered), _iso(e), position, ident))
        elif topic == "turnlog:DeliveryDelivered":
            db.execute("UPDATE deliveries SET state='delivered', updated_at=?, position=? WHERE delivery_id=?",
                       (_iso(e), position, ident))
        elif topic == "turnlog:DeliveryFailed":
            db.execute("UPDATE deliveries SET state='failed', last_error=?, updated_at=?, position=?"
                       " WHERE delivery_id=?", (e.error, _iso(e), position, ident))
        elif topic == "turnlog:DeliveryMarkedUnsure":
            db.execute("UPDATE deliveries SET state='failed', last_error='recovered after an unclean restart',"
                       " updated_at=?, position=? WHERE delivery_id=?", (_iso(e), position, ident))
        else:
            db.execute("UPDATE deliveries SET state='abandoned', last_error=coalesce(last_error, ?), updated_at=?,"
                       " position=? WHERE delivery_id=?", (e.reason, _iso(e), position, ident))


class QueueProjection:
    name = "queue"
    tables = ("queue_items", "inboxes")
    topics = ("turnlog:InboxOpened", "turnlog:InboundAccepted", "turnlog:InboundStarted",
              "turnlog:InboundCompleted", "turnlog:InboundDropped", "turnlog:InboundRejected")

    def create(self, db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS inboxes (inbox_id TEXT PRIMARY KEY, route_id TEXT, session_key TEXT)")
        db.execute(
            """CREATE TABLE IF NOT EXISTS queue_items (
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
        db.execute("CREATE INDEX IF NOT EXISTS queue_by_key ON queue_items (session_key, state)")

    def apply(self, db: sqlite3.Connection, e: Any, position: int) -> None:
        topic = topic_of(e)
        inbox = str(e.originator_id)
        if topic == "turnlog:InboxOpened":
            db.execute("INSERT INTO inboxes VALUES (?,?,?)", (inbox, e.route_id, e.session_key))
        elif topic == "turnlog:InboundAccepted":
            if e.merged_into is None:
                key = db.execute("SELECT session_key FROM inboxes WHERE inbox_id=?", (inbox,)).fetchone()[0]
                db.execute(
                    "INSERT INTO queue_items (inbox_id, item_id, session_key, kind, text, message_ids, state,"
                    " accepted_at, updated_at, position) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (inbox, e.item_id, key, e.kind, e.text, orjson.dumps([e.message_id]).decode(), "pending",
                     _iso(e), _iso(e), position))
            else:
                row = db.execute("SELECT text, message_ids FROM queue_items WHERE inbox_id=? AND item_id=?",
                                 (inbox, e.merged_into)).fetchone()
                ids = orjson.loads(row[1]) + [e.message_id]
                db.execute("UPDATE queue_items SET text=?, message_ids=?, updated_at=?, position=?"
                           " WHERE inbox_id=? AND item_id=?",
                           (row[0] + "\n" + e.text, orjson.dumps(ids).decode(), _iso(e), position, inbox,
                            e.merged_into))
        elif topic == "turnlog:InboundStarted":
            db.execute("UPDATE queue_items SET state='started', session_id=?, turn_id=?, updated_at=?, position=?"
                       " WHERE inbox_id=? AND item_id=?",
                       (e.session_id, e.turn_id, _iso(e), position, inbox, e.item_id))
        elif topic == "turnlog:InboundCompleted":
            db.execute("UPDATE queue_items SET state='completed', outcome=?, updated_at=?, position=?"
                       " WHERE inbox_id=? AND item_id=?", (e.outcome, _iso(e), position, inbox, e.item_id))
        elif topic == "turnlog:InboundDropped":
            for item_id in e.item_ids:
                db.execute("UPDATE queue_items SET state='dropped', outcome=?, updated_at=?, position=?"
                           " WHERE inbox_id=? AND item_id=?", (e.reason, _iso(e), position, inbox, item_id))


class LeasesProjection:
    name = "leases"
    tables = ("leases",)
    topics = ("turnlog:LeaseOpened", "turnlog:LeaseAcquired", "turnlog:LeaseRenewed", "turnlog:LeaseReleased",
              "turnlog:LeaseRevoked", "turnlog:LeaseMoved", "turnlog:LeaseSeeded")

    def create(self, db: sqlite3.Connection) -> None:
        db.execute(
            """CREATE TABLE IF NOT EXISTS leases (
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
        db.execute("CREATE INDEX IF NOT EXISTS leases_by_session ON leases (session_id)")

    def apply(self, db: sqlite3.Connection, e: Any, position: int) -> None:
        topic = topic_of(e)
        ident = str(e.originator_id)
        if topic == "turnlog:LeaseOpened":
            db.execute("INSERT INTO leases (lease_id, session_id, epoch, last_seq, position) VALUES (?,?,0,0,?)",
                       (ident, e.session_id, position))
        elif topic == "turnlog:LeaseAcquired":
            db.execute("UPDATE leases SET epoch=?, owner=?, owner_key=?, turn_id=?, acquired_at=?, expires_at=?,"
                       " position=? WHERE lease_id=?",
                       (e.epoch, e.owner, e.owner_key, e.turn_id, _iso(e), e.expires_at.isoformat(), position,
                        ident))
        elif topic == "turnlog:LeaseSeeded":
            db.execute("UPDATE leases SET last_seq=?, position=? WHERE lease_id=?", (e.last_seq, position, ident))
        elif topic == "turnlog:LeaseRenewed":
            db.execute("UPDATE leases SET expires_at=?, last_seq=?, position=? WHERE lease_id=?",
                       (e.expires_at.isoformat(), e.last_seq, position, ident))
        else:
            outcome = getattr(e, "outcome", None) or getattr(e, "reason", None) or "moved"
            db.execute("UPDATE leases SET owner=NULL, turn_id=NULL, expires_at=NULL, last_outcome=?, position=?"
                       " WHERE lease_id=?", (outcome, position, ident))
