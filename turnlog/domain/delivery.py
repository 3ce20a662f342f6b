"""Delivery: the obligation to send one reply, from recorded to delivered (docs/behaviour.md §6.2, §6.3).

Keyed on the session_id and the reply's sequence number, never on the routing key, so a later
/new or /resume on the same key cannot act on it. It is recorded in the same transaction as the
assistant message it delivers. States: pending -> attempting (owner, attempt n) -> delivered |
failed; a failed or stale attempt may be retried until MAX_ATTEMPTS, then it is abandoned.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from .base import TurnlogAggregate, stream_id

MAX_ATTEMPTS = 3
RECOVERED_PREFIX = (
    "♻️ Recovered reply — the gateway restarted during delivery, so this may be a duplicate:\n\n"
)


def delivery_id(session_id: str, seq: int) -> UUID:
    return stream_id("delivery", f"{session_id}#{seq}")


class DeliveryStateError(ValueError):
    pass


class Delivery(TurnlogAggregate):
    TOPIC = "turnlog:Delivery"

    if TYPE_CHECKING:  # state set by the events' apply methods
        session_id: str
        seq: int
        session_key: str
        platform: str | None
        chat_id: str | None
        thread_id: str | None
        account_id: str | None
        content: str
        state: str
        attempts: int
        owner: str | None
        last_error: str | None
        recovered: bool
        recorded_at: datetime

    class Created(TurnlogAggregate.Created):
        """`account_id` (version 2): the bot account the reply goes out through, so a resend
        reaches the chat through the bot it was owed by; None when the source named none."""

        TOPIC = "turnlog:DeliveryRecorded"
        class_version = 2
        session_id: str
        seq: int
        session_key: str
        platform: str | None
        chat_id: str | None
        thread_id: str | None
        content: str
        turn_id: str | None
        inbound_message_id: str | None
        account_id: str | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["account_id"] = None

        def apply(self, d: "Delivery") -> None:
            d.session_id = self.session_id
            d.seq = self.seq
            d.session_key = self.session_key
            d.platform = self.platform
            d.chat_id = self.chat_id
            d.thread_id = self.thread_id
            d.account_id = self.account_id
            d.content = self.content
            d.state = "pending"
            d.attempts = 0
            d.owner = None
            d.last_error = None
            d.recovered = False
            d.recorded_at = self.timestamp

    class Attempting(TurnlogAggregate.Event):
        TOPIC = "turnlog:DeliveryAttempting"
        owner: str
        attempt: int
        recovered: bool

        def apply(self, d: "Delivery") -> None:
            d.state = "attempting"
            d.attempts = self.attempt
            d.owner = self.owner
            d.recovered = self.recovered

    class Delivered(TurnlogAggregate.Event):
        TOPIC = "turnlog:DeliveryDelivered"
        attempt: int
        recovered: bool

        def apply(self, d: "Delivery") -> None:
            d.state = "delivered"

    class Failed(TurnlogAggregate.Event):
        TOPIC = "turnlog:DeliveryFailed"
        attempt: int
        error: str

        def apply(self, d: "Delivery") -> None:
            d.state = "failed"
            d.last_error = self.error

    class MarkedUnsure(TurnlogAggregate.Event):
        """Recorded after a crash for a reply whose send may or may not have happened."""

        TOPIC = "turnlog:DeliveryMarkedUnsure"

        def apply(self, d: "Delivery") -> None:
            d.state = "failed"
            d.last_error = "recovered after an unclean restart"

    class Abandoned(TurnlogAggregate.Event):
        TOPIC = "turnlog:DeliveryAbandoned"
        reason: str

        def apply(self, d: "Delivery") -> None:
            d.state = "abandoned"

    @property
    def finished(self) -> bool:
        return self.state in ("delivered", "abandoned")

    @property
    def settled(self) -> bool:
        return self.finished

    def attempt(self, owner: str, *, at: datetime, actor: str, cause: str) -> int:
        if self.finished:
            raise DeliveryStateError(f"delivery {self.session_id}#{self.seq} is already {self.state}")
        if self.attempts >= MAX_ATTEMPTS:
            raise DeliveryStateError(f"delivery {self.session_id}#{self.seq} used all {MAX_ATTEMPTS} attempts")
        # Any earlier attempt may have reached the user: a resend says so visibly.
        self.record(Delivery.Attempting, at=at, actor=actor, cause=cause, owner=owner,
                    attempt=self.attempts + 1, recovered=self.state != "pending")
        return self.attempts

    @property
    def outbound_text(self) -> str:
        return RECOVERED_PREFIX + self.content if self.recovered else self.content

    def delivered(self, *, at: datetime, actor: str, cause: str) -> None:
        if self.state != "attempting":
            raise DeliveryStateError(f"delivery {self.session_id}#{self.seq} is {self.state}, not attempting")
        self.record(Delivery.Delivered, at=at, actor=actor, cause=cause, attempt=self.attempts,
                    recovered=self.recovered)

    def failed(self, error: str, *, at: datetime, actor: str, cause: str) -> None:
        if self.state != "attempting":
            raise DeliveryStateError(f"delivery {self.session_id}#{self.seq} is {self.state}, not attempting")
        self.record(Delivery.Failed, at=at, actor=actor, cause=cause, attempt=self.attempts, error=error[:500])
        if self.attempts >= MAX_ATTEMPTS:
            self.record(Delivery.Abandoned, at=at, actor=actor, cause=cause, reason="max_attempts")

    def mark_unsure(self, *, at: datetime, actor: str, cause: str) -> None:
        self.record(Delivery.MarkedUnsure, at=at, actor=actor, cause=cause)

    def abandon(self, reason: str, *, at: datetime, actor: str, cause: str) -> None:
        if not self.finished:
            self.record(Delivery.Abandoned, at=at, actor=actor, cause=cause, reason=reason)
