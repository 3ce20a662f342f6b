"""The ledger sweep (docs/behaviour.md §6.2): every reply owed by a boot that is gone, and every
send of unknown outcome, is settled. A failed row gets one more attempt, sent with the "Recovered
reply" prefix; an unknown one is first reconciled (the gateway's hook asks the platform whether it
arrived) or, without a hook, handled by its platform's policy: resent with the prefix, or held for
an operator. A row out of attempts, or older than 24 hours, is dead-lettered for an operator."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Mapping
from uuid import UUID

from ..domain.delivery import COMMAND_REPLY_SEQ, HOLD, RESEND, VERDICTS, Delivery
from ..projections.views import Views
from .context import CommandContext
from .delivery import Attempt, DeliveryCommands, send_once
from .gateways import GatewayRecords

DELIVERY_MAX_AGE = timedelta(hours=24)

SweepSender = Callable[[dict[str, Any], str], None]
# Did this send reach the chat? True, False, or None (cannot tell yet); given the target and the
# attempt whose outcome is unknown (its text as it was sent).
Reconcile = Callable[[dict[str, Any], Attempt], "bool | None"]


@dataclass
class SweepReport:
    delivered: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)  # kept for callers of earlier releases: now always empty
    skipped: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)  # out of attempts or too old: an operator's now
    unknown: list[str] = field(default_factory=list)  # sent, outcome unknown again
    reconciled: list[str] = field(default_factory=list)  # found delivered by the reconcile hook
    held: list[str] = field(default_factory=list)  # unknown, held for an operator by the platform's policy

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def unknown_policy(policies: Mapping[str, str], platform: str | None) -> str:
    return policies.get(platform or "", policies.get("*", RESEND))


class SweepCommands:
    def __init__(self, ctx: CommandContext, deliveries: DeliveryCommands, views: Views,
                 gateways: GatewayRecords) -> None:
        self.ctx = ctx
        self.deliveries = deliveries
        self.views = views
        self.gateways = gateways

    @property
    def owner(self) -> str:
        return self.gateways.owner

    def sweep(self, send: SweepSender, *, platforms: set[str] | None = None,
              accounts: set[str | None] | None = None, reconcile: Reconcile | None = None) -> SweepReport:
        """Deliver what earlier boots owed and settle unknown sends: claim each row not owned by
        a live boot, reconcile or send, settle. Only rows of `platforms` and of `accounts` (the
        bot account a reply goes out through; None for a row that names none), when given."""
        report = SweepReport()
        self.views.refresh()
        for row in self.views.owed_deliveries():
            ident = UUID(row.delivery_id)
            if ((platforms is not None and row.platform not in platforms)
                    or (accounts is not None and self._account(ident) not in accounts)):
                report.skipped.append(row.delivery_id)
                continue
            outcome = self._sweep_one(ident, send, reconcile)
            getattr(report, outcome).append(row.delivery_id)
        return report

    def _account(self, ident: UUID) -> str | None:
        delivery: Delivery | None = self.ctx.get(ident, fresh=True)
        return delivery.account_id if delivery is not None else None

    def _sweep_one(self, ident: UUID, send: SweepSender, reconcile: Reconcile | None) -> str:
        ctx = self.ctx
        claimed: list[Delivery] = []

        def claim() -> str:
            claimed.clear()
            delivery: Delivery | None = ctx.get(ident, fresh=True)
            if delivery is None or delivery.finished or delivery.state == "dead":
                return "skipped"
            if delivery.state == "attempting" and delivery.owner == self.owner:
                return "skipped"  # in flight in this very process
            if delivery.state == "attempting" and delivery.owner and self.gateways.boot_alive(delivery.owner):
                return "skipped"  # a live gateway is sending it (docs/behaviour.md §6.2: only dead owners' rows)
            now = ctx.clock.now()
            out = delivery.out_of_attempts(ctx.config.delivery_max_attempts)
            if out or now - delivery.recorded_at > DELIVERY_MAX_AGE:
                reason = "max_attempts" if out else "too_old"
                delivery.dead_letter(reason, at=now, actor=self.owner, cause="sweep")
                ctx.save(delivery)
                return "dead"
            if delivery.state in ("unknown", "attempting"):  # attempting: by a boot that died mid-send
                verdict = self._verdict(delivery, reconcile)
                if verdict != "resend" and delivery.state == "attempting":
                    delivery.mark_unsure(at=now, actor=self.owner, cause="sweep")
                if verdict is None:
                    if delivery.pending_events:
                        ctx.save(delivery)
                    return "held"
                if verdict != "resend":
                    delivery.reconcile(verdict, at=now, actor=self.owner,
                                       cause="sweep:reconcile" if reconcile else "sweep")
                    if verdict != "not_delivered":
                        ctx.save(delivery)
                        return "reconciled" if verdict == "delivered" else "unknown"
            delivery.attempt(self.owner, at=now, actor=self.owner, cause="sweep",
                             max_attempts=ctx.config.delivery_max_attempts)
            ctx.save(delivery)
            claimed.append(delivery)
            return "claimed"
        outcome = ctx.retrying(claim, f"claiming delivery {ident}")
        if outcome == "reconciled":
            self._answered(ctx.get(ident, fresh=True))
        if not claimed:
            return outcome
        delivery = claimed[0]
        failure = send_once(send, self._target(delivery), self.deliveries.outbound_text(delivery), key=delivery.idempotency_key)
        settled = self.deliveries.settle_send(ident, failure, cause="sweep")
        if failure is None:
            self._answered(delivery)
            return "delivered"
        return {"dead": "dead", "unknown": "unknown"}.get(settled.state, "failed")

    def _verdict(self, delivery: Delivery, reconcile: Reconcile | None) -> str | None:
        """delivered / not_delivered / unknown from the hook; else "resend" or None (hold) by policy."""
        if reconcile is not None:
            answer = reconcile(self._target(delivery), Attempt(delivery.id, delivery.attempts, self.deliveries.outbound_text(delivery)))
            if answer not in VERDICTS:
                answer = None
            return VERDICTS[answer]
        policy = unknown_policy(self.ctx.config.unknown_send_policy, delivery.platform)
        return None if policy == HOLD else "resend"

    def _target(self, delivery: Delivery) -> dict[str, Any]:
        return {"delivery_id": str(delivery.id), "session_id": delivery.session_id,
                "session_key": delivery.session_key, "platform": delivery.platform, "chat_id": delivery.chat_id,
                "thread_id": delivery.thread_id, "account_id": delivery.account_id,
                "idempotency_key": delivery.idempotency_key}

    def _answered(self, delivery: Delivery | None) -> None:
        """Delivered: the turn is answered, so it must not also be resumed (a command's answer
        answers no turn)."""
        if delivery is not None and delivery.seq != COMMAND_REPLY_SEQ:
            self.gateways.change_session(delivery.session_id, lambda s, now: s.clear_resume_pending(
                at=now, actor=self.owner, cause="sweep"))
