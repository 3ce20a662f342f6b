"""Gateway: the boots of one named gateway, in order (docs/behaviour.md §7, seed 002 §7).

A boot starts, may begin a drain, and stops — cleanly, or with its drain timed out. A boot that
never recorded a stop ended uncleanly (a crash, SIGKILL, power loss): that is read from the log
itself, not from a marker file that can go missing. Boots of one gateway name follow one another;
several gateway names may share a log.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, TYPE_CHECKING
from uuid import UUID

from .base import TurnlogAggregate, stream_id

RECENT_BOOTS = 20
BOOT_STORM_BOOTS = 3
BOOT_STORM_WINDOW_S = 60.0


def gateway_id(name: str) -> UUID:
    return stream_id("gateway", name)


def _trimmed(boots: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last RECENT_BOOTS boots, and every older one that still needs recovery: a boot that
    died holding turns is forgotten only once a later boot has recovered it (or it stopped clean),
    however many boots failed during start-up in between."""
    excess = len(boots) - RECENT_BOOTS
    if excess <= 0:
        return boots
    kept = []
    for n, b in enumerate(boots):
        settled = b["recovered"] or b["state"] == "stopped"
        if n < len(boots) - RECENT_BOOTS and settled and excess > 0:
            excess -= 1
            continue
        kept.append(b)
    return kept


class Gateway(TurnlogAggregate):
    TOPIC = "turnlog:Gateway"

    if TYPE_CHECKING:  # state set by the events' apply methods
        name: str
        boots: list[dict[str, Any]]

    class Created(TurnlogAggregate.Created):
        TOPIC = "turnlog:GatewayRegistered"
        name: str

        def apply(self, g: "Gateway") -> None:
            g.name = self.name
            g.boots = []  # recent boots, oldest first: {boot_id, pid, host, started_at, state, ...}

    class Started(TurnlogAggregate.Event):
        TOPIC = "turnlog:GatewayStarted"
        boot_id: str
        pid: int
        host: str
        previous_boot_id: str | None
        previous_clean: bool | None

        def apply(self, g: "Gateway") -> None:
            boot = {"boot_id": self.boot_id, "pid": self.pid, "host": self.host,
                    "started_at": self.timestamp, "state": "running", "drain_reason": None,
                    "stopped_at": None, "drain_timed_out": False, "recovered": False}
            g.boots = _trimmed([*g.boots, boot])

    class DrainBegun(TurnlogAggregate.Event):
        TOPIC = "turnlog:GatewayDrainBegun"
        boot_id: str
        reason: str
        timeout_s: float

        def apply(self, g: "Gateway") -> None:
            g._update(self.boot_id, state="draining", drain_reason=self.reason)

    class Stopped(TurnlogAggregate.Event):
        TOPIC = "turnlog:GatewayStopped"
        boot_id: str
        clean: bool
        drain_timed_out: bool

        def apply(self, g: "Gateway") -> None:
            g._update(self.boot_id, state="stopped" if self.clean else "stopped_unclean",
                      stopped_at=self.timestamp, drain_timed_out=self.drain_timed_out)

    class Recovered(TurnlogAggregate.Event):
        """The unclean end of a boot was dealt with (by the next boot, or by an operator)."""

        TOPIC = "turnlog:GatewayRecovered"
        boot_id: str
        interrupted_turns: int
        replies_to_redeliver: int
        resume_pending: int
        suspended: int

        def apply(self, g: "Gateway") -> None:
            g._update(self.boot_id, recovered=True)

    def _update(self, boot_id: str, **changes: object) -> None:
        self.boots = [{**b, **changes} if b["boot_id"] == boot_id else b for b in self.boots]

    @property
    def last_boot(self) -> dict[str, Any] | None:
        return self.boots[-1] if self.boots else None

    def boot(self, boot_id: str) -> dict[str, Any] | None:
        return next((b for b in self.boots if b["boot_id"] == boot_id), None)

    @staticmethod
    def ended_clean(boot: dict[str, Any]) -> bool:
        return bool(boot["state"] == "stopped")

    def unrecovered(self, except_boot: str | None = None) -> list[dict[str, Any]]:
        """Boots that ended (or are presumed to have ended) uncleanly and were not recovered yet."""
        return [b for b in self.boots if b["boot_id"] != except_boot and not b["recovered"]
                and b["state"] != "stopped"]

    def boot_storm(self, now: datetime) -> bool:
        """At least BOOT_STORM_BOOTS boots within the window (this one included)."""
        since = now - timedelta(seconds=BOOT_STORM_WINDOW_S)
        return sum(1 for b in self.boots if b["started_at"] >= since) >= BOOT_STORM_BOOTS

    def start(self, boot_id: str, *, pid: int, host: str, at: datetime, actor: str, cause: str) -> None:
        previous = self.last_boot
        self.record(Gateway.Started, at=at, actor=actor, cause=cause, boot_id=boot_id, pid=pid, host=host,
                    previous_boot_id=previous["boot_id"] if previous else None,
                    previous_clean=self.ended_clean(previous) if previous else None)

    def begin_drain(self, boot_id: str, reason: str, timeout_s: float, *, at: datetime, actor: str,
                    cause: str) -> None:
        self.record(Gateway.DrainBegun, at=at, actor=actor, cause=cause, boot_id=boot_id, reason=reason,
                    timeout_s=timeout_s)

    def stop(self, boot_id: str, *, clean: bool, drain_timed_out: bool, at: datetime, actor: str,
             cause: str) -> None:
        self.record(Gateway.Stopped, at=at, actor=actor, cause=cause, boot_id=boot_id, clean=clean,
                    drain_timed_out=drain_timed_out)

    def recovered(self, boot_id: str, *, interrupted_turns: int, replies_to_redeliver: int,
                  resume_pending: int, suspended: int, at: datetime, actor: str, cause: str) -> None:
        self.record(Gateway.Recovered, at=at, actor=actor, cause=cause, boot_id=boot_id,
                    interrupted_turns=interrupted_turns, replies_to_redeliver=replies_to_redeliver,
                    resume_pending=resume_pending, suspended=suspended)
