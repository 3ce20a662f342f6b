"""Hermes' owed replies (delivery_obligations rows pending, attempting or failed) as turnlog deliveries.

Hermes redelivers exactly these at startup; after a move to turnlog its sweep must, so each becomes a
Delivery of the imported session (DeliveryRecorded, actor `import:hermes`), then marked unsure:
the old gateway may have sent it before it stopped, so the sweep's resend carries the recovered-reply
prefix, as for turnlog's own replies after a crash. Delivered (and abandoned) rows stay history, in
the home's import record only.

A Hermes row names its routing key, not its session: the reply is the last assistant message with
the row's text among the sessions that key served, else the last assistant message of the session
the key routes to now.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import IntegrityError

from ..commands.context import CommandContext
from ..domain.delivery import Delivery, delivery_id
from ..domain.imported import IMPORT_ACTOR, import_cause
from ..domain.keys import RoutingKey
from ..domain.transcript import read_transcript
from . import cells
from .formats import HermesHome

OWED_STATES = ("pending", "attempting", "failed")


def import_owed_replies(ctx: CommandContext, home: HermesHome, rows: dict[str, dict[str, Any]],
                        routes: dict[str, list[tuple[RoutingKey, dict[str, Any]]]],
                        skipped: list[dict[str, str]], dry_run: bool) -> int:
    """Save (unless `dry_run`) a delivery for each owed row not in the log yet; how many are new."""
    routed: dict[str, str] = {}  # Hermes key -> the session it routes to
    turnlog_key: dict[str, str] = {}
    for session_id, entries in routes.items():
        for rk, entry in entries:
            routed[entry.get("session_key") or rk.key] = session_id
            turnlog_key[session_id] = rk.key
    newest = sorted(rows, key=lambda s: cells.epoch(rows[s].get("started_at"), "", []) or 0.0, reverse=True)
    new = 0
    for obligation in home.ledger:
        if obligation.get("state") not in OWED_STATES:
            continue
        what = f"owed reply {obligation.get('obligation_id')}"
        content, key = obligation.get("content"), obligation.get("session_key")
        if not isinstance(content, str) or not content or not isinstance(key, str):
            skipped.append({"what": what, "reason": "no reply text or no routing key"})
            continue
        sessions = list(dict.fromkeys([*filter(None, [routed.get(key)]),
                                       *(s for s in newest if rows[s].get("session_key") == key)]))
        found = ("", 0) if dry_run and sessions else _reply(ctx, content, sessions)
        if found is None:
            skipped.append({"what": what, "reason": f"no imported session of {key} holds a reply"})
            continue
        session_id, seq = found
        ident = delivery_id(session_id, seq)
        if not dry_run and ctx.get(ident, fresh=True) is not None:
            continue  # an earlier run imported it (or the reply was turnlog's own)
        new += 1
        if dry_run:
            continue
        now = ctx.clock.now()
        cause = f"{import_cause(str(home.path), session_id)}:obligation:{obligation.get('obligation_id')}"
        delivery = Delivery.new(
            Delivery.Created, id=ident, at=now, actor=IMPORT_ACTOR, cause=cause, session_id=session_id, seq=seq,
            session_key=turnlog_key.get(session_id, key), platform=_text(obligation.get("platform")),
            chat_id=_text(obligation.get("chat_id")), thread_id=_text(obligation.get("thread_id")), content=content,
            turn_id=None, inbound_message_id=None, account_id=None)
        delivery.mark_unsure(at=now, actor=IMPORT_ACTOR, cause=cause)
        try:
            ctx.save(delivery)
        except IntegrityError:
            new -= 1  # another importer saved it first
    return new


def _reply(ctx: CommandContext, content: str, sessions: list[str]) -> tuple[str, int] | None:
    """(session_id, seq) of the reply: the text's last assistant message among `sessions` (the
    routed one first, then newest first), else the first one's last assistant message."""
    fallback = None
    for session_id in sessions:
        messages = read_transcript(ctx.app.events.get, session_id)
        replies = [m for m in messages if m.role == "assistant"]
        match = next((m for m in reversed(replies) if m.content == content), None)
        if match is not None:
            return session_id, match.originator_version
        if fallback is None and replies:
            fallback = session_id, replies[-1].originator_version
    return fallback


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None if value is None else str(value)
