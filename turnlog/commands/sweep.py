"""The startup ledger sweep (docs/behaviour.md §6.2): every reply owed by a boot that is gone is
claimed (one more attempt), sent with the "Recovered reply" prefix and settled; after the third
attempt, or 24 hours, a row is abandoned."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable
from uuid import UUID

from ..domain.delivery import MAX_ATTEMPTS, Delivery
from ..projections.views import Views
from .context import CommandContext
from .delivery import DeliveryCommands
from .gateways import GatewayRecords

DELIVERY_MAX_AGE = timedelta(hours=24)

SweepSender = Callable[[dict[str, Any], str], None]


@dataclass
class SweepReport:
    delivered: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


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

    def sweep(self, send: SweepSender, *, platforms: set[str] | None = None) -> SweepReport:
        """Deliver what earlier boots owed: claim each row not owned by this boot, send, settle."""
        report = SweepReport()
        self.views.refresh()
        for row in self.views.owed_deliveries():
            ident = UUID(row.delivery_id)
            if platforms is not None and row.platform not in platforms:
                report.skipped.append(row.delivery_id)
                continue
            outcome = self._sweep_one(ident, send)
            getattr(report, outcome).append(row.delivery_id)
        return report

    def _sweep_one(self, ident: UUID, send: SweepSender) -> str:
        ctx = self.ctx

        def claim() -> tuple[str, Delivery | None]:
            delivery: Delivery | None = ctx.get(ident, fresh=True)
            if delivery is None or delivery.finished:
                return "skipped", None
            if delivery.state == "attempting" and delivery.owner == self.owner:
                return "skipped", None  # in flight in this very process
            if delivery.state == "attempting" and delivery.owner and self.gateways.boot_alive(delivery.owner):
                return "skipped", None  # a live gateway is sending it (docs/behaviour.md §6.2: only dead owners' rows)
            now = ctx.clock.now()
            if delivery.attempts >= MAX_ATTEMPTS or now - delivery.recorded_at > DELIVERY_MAX_AGE:
                delivery.abandon("max_attempts" if delivery.attempts >= MAX_ATTEMPTS else "too_old", at=now,
                                 actor=self.owner, cause="sweep")
                ctx.save(delivery)
                return "abandoned", None
            delivery.attempt(self.owner, at=now, actor=self.owner, cause="sweep")
            ctx.save(delivery)
            return "claimed", delivery
        outcome, delivery = ctx.retrying(claim, f"claiming delivery {ident}")
        if delivery is None:
            return outcome
        target = {"delivery_id": str(ident), "session_id": delivery.session_id, "session_key": delivery.session_key,
                  "platform": delivery.platform, "chat_id": delivery.chat_id, "thread_id": delivery.thread_id,
                  "account_id": delivery.account_id}
        try:
            send(target, delivery.outbound_text)
            error = None
        except Exception as e:  # noqa: BLE001 - any adapter failure is a failed attempt
            error = f"{type(e).__name__}: {e}"
        settled = self.deliveries.settle(ident, error=error, cause="sweep")
        if error is None:
            # Delivered: the turn is answered, so it must not also be resumed.
            self.gateways.change_session(delivery.session_id, lambda s, now: s.clear_resume_pending(
                at=now, actor=self.owner, cause="sweep"))
            return "delivered"
        return "abandoned" if settled.state == "abandoned" else "failed"
