"""What `Turnlog.status` reports: a gateway's last boot and how it ended, and what is in flight
or waiting on an operator (running turns, owed replies, interrupted and suspended sessions)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .domain.gateway import Gateway
from .projections.base import TypedRow
from .projections.leases_views import LeaseRow
from .projections.ledger_views import OwedDelivery
from .projections.views import Views


@dataclass(frozen=True)
class BootSummary(TypedRow):
    """A boot of the gateway: who ran it and how it ended. `ended_clean` is None while it is
    marked running or draining and not recovered: it is alive, or died without a stop."""
    boot_id: str
    pid: int | None
    host: str | None
    state: str  # running, draining or stopped
    drain_reason: str | None
    drain_timed_out: bool
    recovered: bool
    started_at: str
    stopped_at: str | None
    ended_clean: bool | None


@dataclass(frozen=True)
class ResumePendingSession(TypedRow):
    """A session interrupted and waiting to be resumed."""
    session_id: str
    session_key: str
    resume_reason: str | None
    resume_marked_at: str | None


@dataclass(frozen=True)
class SuspendedSession(TypedRow):
    """A suspended session: the next message on its key starts a new one."""
    session_id: str
    session_key: str
    suspend_reason: str | None


@dataclass(frozen=True)
class GatewayStatus(TypedRow):
    """The gateway `gateway` now: its `last_boot` (None: never started), the turns running
    (`active_turns`), the leases their holders left to expire (`expired_leases`: no running turn,
    recovery's to close or the next taker's), the replies owed (`pending_deliveries`), and the
    sessions waiting to be resumed or suspended, and the replies dead-lettered for an operator."""
    gateway: str
    last_boot: BootSummary | None
    active_turns: list[LeaseRow]
    expired_leases: list[LeaseRow]
    pending_deliveries: list[OwedDelivery]
    resume_pending: list[ResumePendingSession]
    suspended: list[SuspendedSession]
    dead_deliveries: list[OwedDelivery]  # given up by turnlog, waiting for an operator's retry or abandon


def gateway_status(name: str, gateway: Gateway | None, views: Views, now: datetime) -> GatewayStatus:
    """The status of gateway `name` from its aggregate (None: never started) and the read models,
    as of `now` on the leases' clock."""
    boot = gateway.last_boot if gateway is not None else None
    held = views.held_leases()

    def expired(row: LeaseRow) -> bool:
        return row.expires_at is not None and datetime.fromisoformat(row.expires_at) <= now
    return GatewayStatus(
        gateway=name,
        last_boot=None if boot is None else _summary(boot),
        active_turns=[row for row in held if not expired(row)],
        expired_leases=[row for row in held if expired(row)],
        pending_deliveries=views.owed_deliveries(),
        resume_pending=[ResumePendingSession(r.session_id, r.session_key, r.reason, r.marked_at)
                        for r in views.resume_pending_any()],
        suspended=[SuspendedSession(r.session_id, r.session_key, r.reason) for r in views.suspended()],
        dead_deliveries=views.dead_deliveries(),
    )


def boot_summaries(gateway: Gateway | None) -> list[BootSummary]:
    """The boots the gateway's aggregate keeps (the recent ones and any older one still to be
    recovered), oldest first; none for a gateway never started."""
    return [_summary(boot) for boot in gateway.boots] if gateway is not None else []


def _summary(boot: dict[str, Any]) -> BootSummary:
    return BootSummary(
        **{k: boot[k] for k in ("boot_id", "pid", "host", "state", "drain_reason", "drain_timed_out", "recovered")},
        started_at=boot["started_at"].isoformat(),
        stopped_at=boot["stopped_at"].isoformat() if boot["stopped_at"] else None,
        # A boot still marked running or draining is either alive or died without a stop; once
        # recovered it is known to have died, so it did not end clean.
        ended_clean=Gateway.ended_clean(boot) if boot["state"] not in ("running", "draining") or boot["recovered"]
        else None)
