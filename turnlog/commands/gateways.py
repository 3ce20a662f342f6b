"""A gateway's record and its boots' liveness: what starting, draining and stopping a boot
(boots.py), recovering after a crash (recovery.py) and the ledger sweep (sweep.py) all read."""

from __future__ import annotations

import os
import socket
from typing import Any, Callable

from ..domain import heartbeat as liveness
from ..domain.gateway import Gateway, gateway_id
from ..domain.heartbeat import Heartbeat, heartbeat_id
from ..domain.lease import TurnLease
from ..errors import GatewayStillRunning
from ..projections.views import Views
from .context import CommandContext
from .lease import LeaseCommands, lease_id


class GatewayRecords:
    """The gateways' aggregates and the liveness of their boots, as this boot (`owner`) sees them."""

    def __init__(self, ctx: CommandContext, leases: LeaseCommands, views: Views) -> None:
        self.ctx = ctx
        self.leases = leases
        self.views = views

    @property
    def owner(self) -> str:
        return self.leases.owner

    def record(self, name: str, actor: str, cause: str, fresh: bool = True) -> Gateway:
        """The gateway's aggregate to record on (created when it never booted)."""
        gateway: Gateway | None = self.ctx.get(gateway_id(name), fresh)
        if gateway is None:
            gateway = Gateway.new(Gateway.Created, id=gateway_id(name), at=self.ctx.clock.now(), actor=actor,
                                  cause=cause, name=name)
        return gateway

    def gateway(self, name: str) -> Gateway | None:
        return self.ctx.get(gateway_id(name), fresh=True)

    def boot_alive(self, boot_id: str, *, host: str | None = None, pid: int | None = None) -> bool:
        """Is the boot alive: its heartbeat not expired or ended, its process not gone from this host."""
        events = self.ctx.app.events
        last = next(iter(events.get(heartbeat_id(boot_id), desc=True, limit=1)), None)
        if last is not None and (host is None or pid is None):
            first: Any = next(iter(events.get(heartbeat_id(boot_id), lte=1)))
            host, pid = first.host, first.pid
        if host is None or pid is None:
            return False  # not a gateway boot (no heartbeat, nothing recorded): nobody keeps it alive
        same_host = host == socket.gethostname()
        return liveness.alive(ended=isinstance(last, Heartbeat.Ended), expires_at=getattr(last, "expires_at", None),
                              now=self.ctx.clock.now(), same_host=same_host,
                              process_exists=_pid_alive(pid) if same_host else None)

    def refuse_if_alive(self, boots: list[dict], *, this_process_ok: bool = False) -> None:
        """`this_process_ok`: a boot of this very process is being replaced by it, not raced."""
        host = socket.gethostname()
        for boot in boots:
            if this_process_ok and boot["pid"] == os.getpid() and boot["host"] == host:
                continue
            if boot["state"] in ("running", "draining") and self.boot_alive(boot["boot_id"], host=boot["host"],
                                                                            pid=boot["pid"]):
                where = "" if boot["host"] == host else f" on {boot['host']}"
                raise GatewayStillRunning(f"boot {boot['boot_id']} of this gateway is still running"
                                          f" (pid {boot['pid']}{where}); stop it first")

    def holds(self, session_id: str) -> bool:
        lease: TurnLease | None = self.ctx.get(lease_id(session_id), fresh=True)
        return lease is not None and lease.owner == self.owner

    def held_by(self, owners: list[str]) -> list[str]:
        if not owners:
            return []
        self.views.refresh()
        return self.views.sessions_held_by(owners)

    def change_session(self, session_id: str, change: Callable[[Any, Any], bool]) -> bool:
        def step() -> bool:
            session = self.ctx.session(session_id)
            if session is None or not change(session, self.ctx.clock.now()):
                return False
            self.ctx.save(session)
            return True
        return self.ctx.retrying(step, f"changing session {session_id}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
