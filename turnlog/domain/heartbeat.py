"""Heartbeat: the liveness of one gateway boot, across processes and hosts (docs/behaviour.md §6.2).

A boot records its heartbeat in the same transaction as its start, and its lease keeper renews it
every third of `heartbeat_ttl_s`; a clean stop ends it. Another boot is treated as dead — its rows
reclaimed, its turns recovered — only once its heartbeat has expired or ended — or, on its own
host, where the process table needs no clock, once its process is gone. Each boot writes its own stream, so renewals never contend with each
other or with the gateway's boot list, and a renewal needs no read: one small event per third of
the TTL per running boot (about 4,300 events a day per boot at the default 60 s).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from .base import TurnlogAggregate, stream_id


def heartbeat_id(boot_id: str) -> UUID:
    return stream_id("heartbeat", boot_id)


class Heartbeat(TurnlogAggregate):
    TOPIC = "turnlog:Heartbeat"

    if TYPE_CHECKING:  # state set by the events' apply methods
        boot_id: str
        host: str
        pid: int
        expires_at: datetime
        ended: bool

    class Created(TurnlogAggregate.Created):
        TOPIC = "turnlog:HeartbeatStarted"
        boot_id: str
        gateway: str
        host: str
        pid: int
        expires_at: datetime

        def apply(self, hb: "Heartbeat") -> None:
            hb.boot_id = self.boot_id
            hb.host = self.host
            hb.pid = self.pid
            hb.expires_at = self.expires_at
            hb.ended = False

    class Renewed(TurnlogAggregate.Event):
        TOPIC = "turnlog:HeartbeatRenewed"
        expires_at: datetime

        def apply(self, hb: "Heartbeat") -> None:
            hb.expires_at = self.expires_at
            hb.ended = False  # the same instance may start its gateway again after a stop

    class Ended(TurnlogAggregate.Event):
        TOPIC = "turnlog:HeartbeatEnded"

        def apply(self, hb: "Heartbeat") -> None:
            hb.ended = True

    def renew(self, ttl_s: float, *, at: datetime, actor: str, cause: str) -> None:
        self.record(Heartbeat.Renewed, at=at, actor=actor, cause=cause, expires_at=at + timedelta(seconds=ttl_s))

    def end(self, *, at: datetime, actor: str, cause: str) -> None:
        if not self.ended:
            self.record(Heartbeat.Ended, at=at, actor=actor, cause=cause)


def due(expires_at: datetime, now: datetime, ttl_s: float) -> bool:
    """Renew once a third of the TTL has passed since the last renewal (what the keeper runs by)."""
    return expires_at - now <= timedelta(seconds=ttl_s * 2 / 3)


def alive(*, ended: bool, expires_at: datetime | None, now: datetime, same_host: bool,
          process_exists: bool | None) -> bool:
    """Is the boot alive? `process_exists` is known only on the boot's own host (None elsewhere).

    On the boot's own host the process table is exact and needs no clock: the boot lives as long
    as its process (pid reuse aside). Elsewhere only the heartbeat can tell, and it must not have
    expired. A clean stop ends the heartbeat everywhere."""
    if ended:
        return False
    if same_host and process_exists is not None:
        return process_exists
    return expires_at is not None and now < expires_at
