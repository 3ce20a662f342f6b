"""Crash recovery as a replay (docs/behaviour.md §6, §7; seed 002 §7).

What a crashed boot left behind is read from the log: a turn lease still held by a boot that
never recorded a clean stop is an interrupted turn (the durable active-turn marker). For each:
- its reply is persisted and owed: the ledger row is (re)delivered by the sweep with the
  "Recovered reply" prefix, never regenerated; a reply persisted without a ledger row becomes
  an unowned row (silence-marker rules apply); either way the turn is finished as its own unwind
  would have finished it (resume_pending cleared), so it is never also resumed;
- no reply persisted: the session is marked resume_pending (restart_interrupted) and the turn
  is resumed once, unless this is the session's third interrupted turn in a row: then it is
  suspended (stuck_loop) and every item still in flight on it is closed.
A resumed turn answers the item its interrupted turn started, so that is the item recovered with it.
Candidates are found through the read models (views, caught up first by `views.refresh()`) and
every action is decided on the aggregates themselves, so recovery running twice, or racing a live
process, is safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from ..domain.delivery import Delivery, delivery_id
from ..domain.gateway import Gateway
from ..domain.inbox import WAKEUP, Inbox, InboxItem
from ..domain.reply import turn_answer
from ..domain.lease import RESTART_RECOVERY, TurnLease
from ..domain.recovery import (SUSPENDED_STUCK_LOOP, UNOWNED_ROW, InterruptedFacts, answered_items,
                               closes_in_flight_items, decide_interrupted_turn, finishes_the_turn)
from ..domain.silence import outbound_for_reply
from ..domain.transcript import MessageAppended, read_transcript
from ..projections.views import Views
from .context import CommandContext
from .delivery import DeliveryCommands
from .gateways import GatewayRecords
from .lease import LeaseCommands, lease_id
from .tool_answers import answer_events

AUTO_RESUME_REASONS = frozenset({"restart_timeout", "shutdown_timeout", "restart_interrupted"})


@dataclass
class InterruptedTurn:
    session_id: str
    session_key: str | None
    turn_id: str | None
    epoch: int
    boot_id: str
    action: str  # redeliver | unowned_row | nothing_owed | resume_pending | suspended_stuck_loop | dropped

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RecoveryReport:
    gateway: str
    recovered_boots: list[str] = field(default_factory=list)
    clean_boots_with_orphans: list[str] = field(default_factory=list)
    interrupted: list[InterruptedTurn] = field(default_factory=list)
    dry_run: bool = False

    def count(self, action: str) -> int:
        return sum(1 for t in self.interrupted if t.action == action)

    def to_dict(self) -> dict[str, Any]:
        return {"gateway": self.gateway, "dry_run": self.dry_run, "recovered_boots": self.recovered_boots,
                "clean_boots_with_orphans": self.clean_boots_with_orphans,
                "interrupted": [t.to_dict() for t in self.interrupted]}


class RecoveryCommands:
    def __init__(self, ctx: CommandContext, turns: LeaseCommands, deliveries: DeliveryCommands,
                 views: Views, gateways: GatewayRecords) -> None:
        self.ctx = ctx
        self.turns = turns
        self.deliveries = deliveries
        self.views = views
        self.gateways = gateways

    @property
    def owner(self) -> str:
        return self.turns.owner

    def recover(self, name: str = "main", *, dry_run: bool = False, current_boot: str | None = None) -> RecoveryReport:
        report = RecoveryReport(gateway=name, dry_run=dry_run)
        gateway = self.gateways.gateway(name)
        if gateway is None:
            return report
        unclean = gateway.unrecovered(except_boot=current_boot)
        if current_boot is None:
            self.gateways.refuse_if_alive(unclean)
        clean_ids = [b["boot_id"] for b in gateway.boots if Gateway.ended_clean(b) and b["boot_id"] != current_boot]
        for boot in unclean:
            for session_id in self.gateways.held_by([boot["boot_id"]]):
                turn = self._recover_turn(session_id, boot["boot_id"], dry_run)
                if turn is not None:
                    report.interrupted.append(turn)
            report.recovered_boots.append(boot["boot_id"])
        for session_id in self.gateways.held_by(clean_ids):
            # A clean stop drained every turn: a marker left by it is an orphan, dropped unresumed.
            lease: TurnLease | None = self.ctx.get(lease_id(session_id), fresh=True)
            if lease is not None and lease.owner is not None and lease.owner in clean_ids:
                report.clean_boots_with_orphans.append(lease.owner)
                if not dry_run:
                    revoked = self.turns.revoke(session_id, "orphan_after_clean_stop", actor=self.owner,
                                                cause="recovery")
                    if revoked is not None:
                        self.ctx.save(revoked)
        if not dry_run:
            for boot in unclean:
                self._mark_recovered(name, boot["boot_id"], report)
        return report

    def _mark_recovered(self, name: str, boot_id: str, report: RecoveryReport) -> None:
        mine = [t for t in report.interrupted if t.boot_id == boot_id]

        def step() -> None:
            gateway = self.gateways.record(name, self.owner, "recovery")
            gateway.recovered(
                boot_id, interrupted_turns=len(mine),
                replies_to_redeliver=sum(1 for t in mine if t.action in ("redeliver", "unowned_row")),
                resume_pending=sum(1 for t in mine if t.action == "resume_pending"),
                suspended=sum(1 for t in mine if t.action == "suspended_stuck_loop"),
                at=self.ctx.clock.now(), actor=self.owner, cause="recovery")
            self.ctx.save(gateway)
        self.ctx.retrying(step, f"recording the recovery of boot {boot_id}")

    def _recover_turn(self, session_id: str, boot_id: str, dry_run: bool) -> InterruptedTurn | None:
        def step() -> InterruptedTurn | None:
            ctx = self.ctx
            lease: TurnLease | None = ctx.get(lease_id(session_id), fresh=True)
            if lease is None or lease.owner != boot_id:
                return None  # released or taken over since the read model was read
            now = ctx.clock.now()
            cause = f"recovery:{boot_id}"
            turn_id, owner_key, epoch = lease.turn_id, lease.owner_key, lease.epoch
            turn_messages = self._turn_messages(session_id, lease.epoch)
            reply = turn_answer(turn_messages)
            inbox, item = self._in_flight(lease.turn_id, session_id)
            internal = item is not None and item.kind == WAKEUP
            session = ctx.session(session_id, fresh=True)
            action = decide_interrupted_turn(InterruptedFacts(
                has_reply=reply is not None,
                delivery_recorded=reply is not None and ctx.get(
                    delivery_id(session_id, reply.originator_version), fresh=True) is not None,
                reply_owes_outbound=reply is not None and outbound_for_reply(reply.content, internal=internal)
                is not None,
                session_open=session is not None and not session.ended,
                session_suspended=session is not None and session.suspended,
                interrupted_before=lease.interrupted_in_a_row))
            items: list[Any] = [lease]
            if action == UNOWNED_ROW:
                assert reply is not None
                items.append(self._unowned_row(session_id, lease, reply, item, internal, cause))
            if finishes_the_turn(action):
                # The turn has its reply: finish it as its own unwind would have (inbound.py), so it is
                # delivered by the sweep (or owes nothing) and never also resumed, even while the sweep
                # skips a platform that is not connected yet.
                resumed = session is not None and session.clear_resume_pending(at=now, actor="system:recovery",
                                                                               cause=cause)
                if resumed:
                    items.append(session)
                if inbox is not None:
                    answered = answered_items(inbox.in_flight(), item.item_id if item else None, session_id, resumed)
                    for item_id, outcome in answered:
                        inbox.complete(item_id, outcome, at=now, actor=self.owner, cause=cause)
                    items.append(inbox)
            elif closes_in_flight_items(action):
                # Closing the session closes every item still in flight on it: an earlier interrupted
                # turn's item as well as this one's (a human message may have continued the session).
                if action == SUSPENDED_STUCK_LOOP:
                    assert session is not None
                    session.suspend("stuck_loop", at=now, actor="system:recovery", cause=cause)
                    items.append(session)
                outcome = "stuck_loop" if action == SUSPENDED_STUCK_LOOP else "session_ended"
                closing = [w.item_id for w in inbox.in_flight() if w.session_id == session_id] if inbox else []
                for item_id in closing:
                    assert inbox is not None
                    inbox.complete(item_id, outcome, at=now, actor=self.owner, cause=cause)
                if closing:
                    items.append(inbox)
            elif session is not None and not session.resume_pending:
                session.mark_resume_pending("restart_interrupted", at=now, actor="system:recovery", cause=cause)
                items.append(session)
            # The calls the turn was cut off in get their answers now, before any resume or later
            # message, so the history a model is handed next has the shape its API accepts.
            answers = answer_events(turn_messages, session_id=session_id, first_seq=lease.last_seq + 1,
                                    epoch=epoch, turn_id=turn_id or "", cut_off_by=RESTART_RECOVERY, at=now,
                                    actor="system:recovery", cause=cause)
            lease.revoke(reason=RESTART_RECOVERY, at=now, actor="system:recovery", cause=cause,
                         last_seq=lease.last_seq + len(answers) if answers else None)
            if not dry_run:
                ctx.save(*answers, *items)
            else:
                for agg in items:
                    if hasattr(agg, "collect_events"):
                        agg.collect_events()
                    ctx.cache.forget(agg.id)
            return InterruptedTurn(session_id, owner_key, turn_id, epoch, boot_id, action)
        return self.ctx.retrying(step, f"recovering the turn on {session_id}")

    def _turn_messages(self, session_id: str, epoch: int) -> list[MessageAppended]:
        turn: list[MessageAppended] = []
        for message in read_transcript(self.ctx.app.events.get, session_id, newest_first=True, limit=50):
            if message.epoch != epoch:
                break
            turn.append(message)
        return list(reversed(turn))

    def _in_flight(self, turn_id: str | None, session_id: str) -> tuple[Inbox | None, InboxItem | None]:
        """The inbound item the turn was answering. A resumed turn works on the item its interrupted
        turn started (see resume()), so when no item started with this turn, it is the session's."""
        ref = self.views.item_of_turn(turn_id) if turn_id else None
        if ref is None:
            ref = self.views.started_item(session_id)
        if ref is None:
            return None, None
        inbox: Inbox | None = self.ctx.get(UUID(ref.inbox_id), fresh=True)
        if inbox is None:
            return None, None
        item = next((i for i in inbox.in_flight() if i.item_id == ref.item_id), None)
        return (inbox, item) if item is not None else (None, None)

    def _unowned_row(self, session_id: str, lease: TurnLease, reply: MessageAppended, item: InboxItem | None,
                     internal: bool, cause: str) -> Delivery:
        outbound = outbound_for_reply(reply.content, internal=internal)
        assert outbound is not None
        session = self.ctx.session(session_id)
        reply_to = item.source if item is not None and item.source else (session.origin if session else None)
        delivery = self.deliveries.obligation(
            session_id=session_id, seq=reply.originator_version, session_key=lease.owner_key or "",
            reply_to=reply_to, content=outbound, turn_id=lease.turn_id,
            inbound_message_id=item.message_ids[-1] if item else None, actor="system:recovery", cause=cause,
            of_message=outbound == reply.content)
        # Unowned and unsure whether a send happened: the sweep's delivery carries the recovered prefix.
        delivery.mark_unsure(at=self.ctx.clock.now(), actor="system:recovery", cause=cause)
        return delivery

    def resume_candidates(self, name: str = "main") -> list[dict[str, Any]]:
        """Sessions to auto-resume now (docs/behaviour.md §7.3); empty during a boot storm."""
        gateway = self.gateways.gateway(name)
        now = self.ctx.clock.now()
        if gateway is not None and gateway.boot_storm(now):
            return []
        self.views.refresh()
        window = self.ctx.config.freshness_window_s
        out = []
        for row in self.views.resume_pending():
            if row.reason not in AUTO_RESUME_REASONS:
                continue
            if window > 0 and row.marked_at is not None:
                from datetime import datetime
                marked = datetime.fromisoformat(row.marked_at)
                if (now - marked).total_seconds() > window:
                    continue
            out.append({"session_id": row.session_id, "session_key": row.session_key,
                        "resume_reason": row.reason, "resume_marked_at": row.marked_at})
        return out
