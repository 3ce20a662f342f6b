"""A gateway's boots: starting one (then recovering what earlier boots left), draining it before a
stop or restart, stopping it, and the boot's heartbeat (docs/behaviour.md §6, §7.1)."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..domain.gateway import Gateway
from ..domain.heartbeat import Heartbeat, heartbeat_id
from ..errors import InvalidRequest
from .context import CommandContext
from .gateways import GatewayRecords
from .recovery import RecoveryCommands, RecoveryReport

DRAIN_POLL_S = 0.05


@dataclass
class BootReport:
    boot_id: str
    previous_boot_id: str | None
    previous_clean: bool | None
    recovery: RecoveryReport
    boot_storm: bool

    def to_dict(self) -> dict[str, Any]:
        return {"boot_id": self.boot_id, "previous_boot_id": self.previous_boot_id,
                "previous_clean": self.previous_clean, "boot_storm": self.boot_storm,
                "recovery": self.recovery.to_dict()}


class BootCommands:
    def __init__(self, ctx: CommandContext, gateways: GatewayRecords, recovery: RecoveryCommands, *,
                 keeper: Any = None) -> None:
        self.ctx = ctx
        self.gateways = gateways
        self.recovery = recovery
        self.keeper = keeper  # the lease keeper, which renews this boot's heartbeat

    @property
    def owner(self) -> str:
        return self.gateways.owner

    def start(self, name: str) -> BootReport:
        """Record this process's boot, then recover whatever earlier boots left unclean.

        Refused (GatewayStillRunning) while an earlier boot of this gateway is alive in another
        process of this host: recovering it would take its running turns away from it."""
        def record_start() -> tuple[str | None, bool | None, bool]:
            gateway = self.gateways.record(name, self.owner, "boot")
            self.gateways.refuse_if_alive(gateway.unrecovered(except_boot=None), this_process_ok=True)
            previous = gateway.last_boot
            now = self.ctx.clock.now()
            gateway.start(self.owner, pid=os.getpid(), host=socket.gethostname(), at=now,
                          actor=self.owner, cause="boot")
            heartbeat = self._heartbeat(name, now)
            self.ctx.save(gateway, heartbeat)
            if self.keeper is not None:
                self.keeper.start_heartbeat(heartbeat)
            return (previous["boot_id"] if previous else None, Gateway.ended_clean(previous) if previous else None,
                    gateway.boot_storm(self.ctx.clock.now()))
        previous_id, previous_clean, storm = self.ctx.retrying(record_start, f"starting gateway {name}")
        report = self.recovery.recover(name, current_boot=self.owner)
        return BootReport(self.owner, previous_id, previous_clean, report, storm)

    def begin_drain(self, name: str, reason: str, timeout_s: float) -> bool:
        """Pre-drain, wait up to timeout_s for running turns, stop. True when the stop was clean."""
        if reason not in ("restart", "shutdown"):
            raise InvalidRequest(f"drain reason must be restart or shutdown, got {reason!r}")
        mark = "restart_timeout" if reason == "restart" else "shutdown_timeout"
        running = self.gateways.held_by([self.owner])
        for session_id in running:
            self.gateways.change_session(session_id, lambda s, now: s.mark_resume_pending(
                mark, at=now, actor=self.owner, cause=f"drain:{reason}"))

        def record_drain() -> None:
            gateway = self.gateways.record(name, self.owner, f"drain:{reason}")
            gateway.begin_drain(self.owner, reason, timeout_s, at=self.ctx.clock.now(), actor=self.owner,
                                cause=f"drain:{reason}")
            self.ctx.save(gateway)
        self.ctx.retrying(record_drain, f"draining gateway {name}")
        deadline = time.monotonic() + max(timeout_s, 0.0)
        still = [s for s in running if self.gateways.holds(s)]
        while still and time.monotonic() < deadline:
            time.sleep(DRAIN_POLL_S)
            still = [s for s in running if self.gateways.holds(s)]
        for session_id in set(running) - set(still):
            self.gateways.change_session(session_id, lambda s, now: s.clear_resume_pending(
                at=now, actor=self.owner, cause=f"drain:{reason}"))
        self.stop(name, clean=not still, drain_timed_out=bool(still))
        return not still

    def stop(self, name: str, *, clean: bool = True, drain_timed_out: bool = False) -> None:
        ended = self.keeper.end_heartbeat(actor=self.owner, cause="stop") if self.keeper is not None else None

        def record_stop() -> None:
            gateway = self.gateways.record(name, self.owner, "stop")
            gateway.stop(self.owner, clean=clean, drain_timed_out=drain_timed_out, at=self.ctx.clock.now(),
                         actor=self.owner, cause="stop")
            self.ctx.save(gateway)
        self.ctx.retrying(record_stop, f"stopping gateway {name}")
        if ended is not None:
            self.ctx.app.save(ended)

    def _heartbeat(self, name: str, now: Any) -> Heartbeat:
        """This boot's heartbeat, started (or, for a second start of this instance, renewed)."""
        ttl = self.ctx.config.heartbeat_ttl_s
        heartbeat: Heartbeat | None = self.ctx.get(heartbeat_id(self.owner), fresh=True)
        if heartbeat is None:
            return Heartbeat.new(Heartbeat.Created, id=heartbeat_id(self.owner), at=now, actor=self.owner,
                                 cause="boot", boot_id=self.owner, gateway=name, host=socket.gethostname(),
                                 pid=os.getpid(), expires_at=now + timedelta(seconds=ttl))
        heartbeat.renew(ttl, at=now, actor=self.owner, cause="boot")
        return heartbeat
