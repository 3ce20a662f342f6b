"""TurnLease: who may write a session's transcript right now (docs/behaviour.md §5, seed 000 §3).

One lease per session_id, shared by every process on the log. Each acquisition gets the next
epoch. Every transcript write is saved together with a renewal of the lease (a turn's first
message with the acquisition, which reserves its seq), so optimistic concurrency fences it: a writer whose lease was taken over, revoked or moved loses the race and
its write leaves no event. A holder that dies stops renewing; after `expires_at` another owner may
take the lease over. An acquisition is the durable "turn started" marker: a message still
waiting for the lease is not an active turn.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from .base import TurnlogAggregate


RESTART_RECOVERY = "restart_recovery"  # the revocation reason of a turn cut off by an unclean stop


class LeaseHeld(Exception):
    def __init__(self, owner: str, owner_key: str, expires_at: datetime) -> None:
        super().__init__(f"held by {owner} for {owner_key} until {expires_at.isoformat()}")
        self.owner = owner
        self.owner_key = owner_key
        self.expires_at = expires_at


class TurnLease(TurnlogAggregate):
    TOPIC = "turnlog:TurnLease"

    if TYPE_CHECKING:  # state set by the events' apply methods
        session_id: str
        epoch: int
        owner: str | None
        owner_key: str | None
        generation: int
        turn_id: str | None
        expires_at: datetime | None
        last_seq: int
        moved_to: str | None
        interrupted_in_a_row: int
        ended: str | None  # how the last turn ended (release outcome, revocation reason); None while one runs
        previous_end: str | None  # how the turn before the current one ended ("taken_over", None: no turn yet)

    class Created(TurnlogAggregate.Created):
        TOPIC = "turnlog:LeaseOpened"
        session_id: str

        def apply(self, lease: "TurnLease") -> None:
            lease.session_id = self.session_id
            lease.epoch = 0
            lease.owner = None
            lease.owner_key = None
            lease.generation = 0
            lease.turn_id = None
            lease.expires_at = None
            lease.last_seq = 0
            lease.moved_to = None
            lease.interrupted_in_a_row = 0  # turns cut off by unclean restarts since the last completed one
            lease.ended = None
            lease.previous_end = None

    class Acquired(TurnlogAggregate.Event):
        """`last_seq` (version 2): the transcript seq the acquisition reserves for the turn's first
        message, which commits with it (a turn's start needs no renewal beside it); None when the
        acquisition reserves nothing (a bare acquire, and every version-1 event)."""

        TOPIC = "turnlog:LeaseAcquired"
        class_version = 2
        epoch: int
        owner: str
        owner_key: str
        generation: int
        turn_id: str
        expires_at: datetime
        taken_over_from: str | None
        last_seq: int | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["last_seq"] = None

        def apply(self, lease: "TurnLease") -> None:
            lease.epoch = self.epoch
            lease.owner = self.owner
            lease.owner_key = self.owner_key
            lease.generation = self.generation
            lease.turn_id = self.turn_id
            lease.expires_at = self.expires_at
            lease.moved_to = None
            # What a starting turn may find left behind (commands/tool_answers.py); getattr: older snapshots.
            lease.previous_end = "taken_over" if self.taken_over_from else getattr(lease, "ended", None)
            lease.ended = None
            if self.last_seq is not None:
                lease.last_seq = self.last_seq

    class Renewed(TurnlogAggregate.Event):
        TOPIC = "turnlog:LeaseRenewed"
        epoch: int
        expires_at: datetime
        last_seq: int

        def apply(self, lease: "TurnLease") -> None:
            lease.expires_at = self.expires_at
            lease.last_seq = self.last_seq

    class Released(TurnlogAggregate.Event):
        TOPIC = "turnlog:LeaseReleased"
        epoch: int
        outcome: str

        def apply(self, lease: "TurnLease") -> None:
            lease.owner = None
            lease.turn_id = None
            lease.expires_at = None
            lease.ended = self.outcome
            if self.outcome == "completed":
                lease.interrupted_in_a_row = 0

    class Revoked(TurnlogAggregate.Event):
        """`last_seq` (version 2): the transcript seq the revoker wrote up to in the same transaction
        (recovery's answers to a cut-off turn's tool calls); None when it wrote nothing (every
        version-1 event)."""

        TOPIC = "turnlog:LeaseRevoked"
        class_version = 2
        epoch: int
        reason: str
        last_seq: int | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["last_seq"] = None

        def apply(self, lease: "TurnLease") -> None:
            if self.last_seq is not None:
                lease.last_seq = self.last_seq
            lease.owner = None
            lease.turn_id = None
            lease.expires_at = None
            lease.ended = self.reason
            if self.reason == RESTART_RECOVERY:
                lease.interrupted_in_a_row = getattr(lease, "interrupted_in_a_row", 0) + 1

    class Moved(TurnlogAggregate.Event):
        TOPIC = "turnlog:LeaseMoved"
        epoch: int
        to_session_id: str

        def apply(self, lease: "TurnLease") -> None:
            lease.owner = None
            lease.turn_id = None
            lease.expires_at = None
            lease.moved_to = self.to_session_id
            lease.ended = "moved"

    class Seeded(TurnlogAggregate.Event):
        """The transcript was started without a turn (a fork copied messages into it)."""

        TOPIC = "turnlog:LeaseSeeded"
        last_seq: int

        def apply(self, lease: "TurnLease") -> None:
            lease.last_seq = self.last_seq

    class RestartsCarried(TurnlogAggregate.Event):
        """Unclean restarts another gateway counted for this session (an import), so the stuck-loop
        guard counts on from there."""

        TOPIC = "turnlog:LeaseRestartsCarried"
        count: int

        def apply(self, lease: "TurnLease") -> None:
            lease.interrupted_in_a_row = self.count

    def carry_restarts(self, count: int, *, at: datetime, actor: str, cause: str) -> None:
        self.record(TurnLease.RestartsCarried, at=at, actor=actor, cause=cause, count=count)

    def seed(self, last_seq: int, *, at: datetime, actor: str, cause: str) -> None:
        self.record(TurnLease.Seeded, at=at, actor=actor, cause=cause, last_seq=last_seq)

    def held_at(self, now: datetime) -> bool:
        return self.owner is not None and self.expires_at is not None and now < self.expires_at

    def acquire(self, *, owner: str, owner_key: str, generation: int, turn_id: str, ttl_s: float,
                at: datetime, actor: str, cause: str, lease_now: datetime | None = None,
                reserve_seq: bool = False) -> int:
        """`lease_now`: the time expiry is judged by when it is not the event's `at` (a replay).
        `reserve_seq`: the acquisition reserves the next transcript seq (`last_seq` afterwards) for
        a message saved in the same transaction."""
        basis = lease_now or at
        if self.held_at(basis):
            raise LeaseHeld(self.owner or "", self.owner_key or "", self.expires_at or basis)
        taken_over_from = self.owner  # still set only if the previous holder never released
        self.record(TurnLease.Acquired, at=at, actor=actor, cause=cause, epoch=self.epoch + 1, owner=owner,
                    owner_key=owner_key, generation=generation, turn_id=turn_id,
                    expires_at=basis + timedelta(seconds=ttl_s), taken_over_from=taken_over_from,
                    last_seq=self.last_seq + 1 if reserve_seq else None)
        return self.epoch

    def holds(self, epoch: int, at: datetime) -> bool:
        return self.epoch == epoch and self.held_at(at)

    def renew(self, *, epoch: int, ttl_s: float, last_seq: int, at: datetime, actor: str, cause: str,
              lease_now: datetime | None = None) -> None:
        self.record(TurnLease.Renewed, at=at, actor=actor, cause=cause, epoch=epoch,
                    expires_at=(lease_now or at) + timedelta(seconds=ttl_s), last_seq=last_seq)

    def release(self, *, epoch: int, outcome: str, at: datetime, actor: str, cause: str) -> bool:
        if self.epoch != epoch or self.owner is None:
            return False
        self.record(TurnLease.Released, at=at, actor=actor, cause=cause, epoch=epoch, outcome=outcome)
        return True

    def revoke(self, *, reason: str, at: datetime, actor: str, cause: str, last_seq: int | None = None) -> bool:
        if self.owner is None:
            return False
        self.record(TurnLease.Revoked, at=at, actor=actor, cause=cause, epoch=self.epoch, reason=reason,
                    last_seq=last_seq)
        return True

    def move(self, *, epoch: int, to_session_id: str, at: datetime, actor: str, cause: str) -> None:
        self.record(TurnLease.Moved, at=at, actor=actor, cause=cause, epoch=epoch, to_session_id=to_session_id)
