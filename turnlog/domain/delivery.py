"""Delivery: the obligation to send one reply, from recorded to delivered (docs/behaviour.md §6.2, §6.3).

Keyed on the session_id and the reply's sequence number, never on the routing key, so a later
/new or /resume on the same key cannot act on it. It is recorded in the same transaction as the
assistant message it delivers. States:

    pending -> attempting (owner, attempt n) -> delivered | failed | unknown
    failed  -> attempting (a resend, with the recovered-reply prefix) ... until the attempt limit -> dead
    unknown -> reconciled: delivered | failed (known not to have arrived: resent without the prefix)
               | unknown (still); or resent with the prefix / held for an operator, by platform policy
    dead    -> retried by an operator (a fresh attempt budget) | abandoned
    * -> abandoned (an operator, a reset)

`unknown` is a send that may have reached the platform (a timeout after the request was written, a
crash between the send and its record): it is never blindly resent. `dead` is a row turnlog gave
up on by itself (the attempt limit, its age): an operator retries or abandons it.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping
from uuid import UUID

from ..errors import SendOutcomeUnknown
from .base import TurnlogAggregate, stream_id
from .transcript import message_at

MAX_ATTEMPTS = 3
MAX_GRANT = 1_000_000  # the most attempts one retry grants: an event's integers stay small
OWED_STATES = ("pending", "attempting", "failed", "unknown")  # what a sweep looks at
STATES = (*OWED_STATES, "delivered", "dead", "abandoned")  # every state a ledger row can be in
RESEND, HOLD = "resend", "hold"  # what to do with an unknown row when no reconcile hook can tell
VERDICTS = {True: "delivered", False: "not_delivered", None: "unknown"}  # a reconcile hook's answer
RECOVERED_PREFIX = (
    "♻️ Recovered reply — the gateway restarted during delivery, so this may be a duplicate:\n\n"
)


# The seq of a slash command's own answer: no transcript message (those start at 1), so
# delivering it answers no turn.
COMMAND_REPLY_SEQ = 0


def delivery_id(session_id: str, seq: int) -> UUID:
    return stream_id("delivery", f"{session_id}#{seq}")


def command_reply_id(route_id: UUID, message_id: str) -> UUID:
    """The delivery of the answer to the command with this message id on this route: a
    redelivered command names the same one."""
    return stream_id("delivery", f"command:{route_id}:{message_id}")


def idempotency_key(ident: UUID) -> str:
    """The same for every attempt of one delivery, for platforms that take one (Slack
    client_msg_id, LINE X-Line-Retry-Key): a resend the platform already has is dropped there."""
    return f"turnlog-{ident}"


def may_have_arrived(failure: BaseException) -> bool:
    """Whether a send that raised may still have reached the platform: the sender says so
    (SendOutcomeUnknown), or the request may have been written before the failure (a read
    timeout, a reset connection). A connect timeout never sent anything."""
    if isinstance(failure, SendOutcomeUnknown):
        return True
    name = type(failure).__name__
    if name.startswith("Connect") and "Timeout" in name:
        return False
    if isinstance(failure, (TimeoutError, ConnectionResetError, BrokenPipeError)):
        return True
    return name.endswith(("Timeout", "TimedOut", "TimeoutError"))


def words_of(get: Callable[..., Iterable[Any]], session_id: str, seq: int, content: str | None,
             read: Mapping[str, Any] | None = None) -> str | None:
    """A delivery's words: its event's own `content`, else those of the transcript message at
    (session_id, seq) it refers to: `read`, that message's fields when the caller read them
    already, or read through `get` (read_transcript's); None when the log holds no such message."""
    if content is not None:
        return content
    if read is not None and read.get("session_id") == session_id and read.get("originator_version") == seq:
        words = read.get("content")
        if isinstance(words, str):
            return words
    message = message_at(get, session_id, seq)
    return message.content if message is not None else None


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
        content: str | None  # None: the transcript message at (session_id, seq) (refers_to_message)
        state: str
        attempts: int
        owner: str | None
        last_error: str | None
        recovered: bool
        recorded_at: datetime
        attempt_floor: int  # attempts made before an operator's last retry
        granted: int | None  # attempts that retry granted (None: the configured limit)
        known_unsent: bool

    class Created(TurnlogAggregate.Created):
        """`account_id` (version 2): the bot account the reply goes out through, so a resend
        reaches the chat through the bot it was owed by; None when the source named none.
        `content` None (version 3): the reply's words are the transcript message at
        (`session_id`, `seq`), saved in the same transaction, and are read from there rather
        than stored twice; a delivery no message backs (a command's answer, a silence notice,
        an import) keeps its own.
        `attempting_owner` and `attempt` (version 4): the first attempt, when the reply is sent
        right after the save that records it: one event where there were a Recorded and an
        Attempting; None when it was recorded without an attempt."""

        TOPIC = "turnlog:DeliveryRecorded"
        class_version = 4
        session_id: str
        seq: int
        session_key: str
        platform: str | None
        chat_id: str | None
        thread_id: str | None
        content: str | None
        turn_id: str | None
        inbound_message_id: str | None
        account_id: str | None
        attempting_owner: str | None = None
        attempt: int | None = None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["account_id"] = None

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            pass  # an older event always carries its content: it reads as it did

        @staticmethod
        def upcast_v3_v4(state: dict[str, Any]) -> None:
            # An older event's attempts, if any, are DeliveryAttempting events of their own.
            state["attempting_owner"] = None
            state["attempt"] = None

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
            d.attempt_floor = 0
            d.granted = None
            d.known_unsent = False
            if self.attempting_owner is not None:
                d.state = "attempting"
                d.attempts = self.attempt or 1
                d.owner = self.attempting_owner

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
            d.known_unsent = False

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
            d.state = "unknown"
            d.last_error = "recovered after an unclean restart"

    class OutcomeUnknown(TurnlogAggregate.Event):
        """The send raised after it may have reached the platform (may_have_arrived)."""

        TOPIC = "turnlog:DeliveryOutcomeUnknown"
        attempt: int
        error: str

        def apply(self, d: "Delivery") -> None:
            d.state = "unknown"
            d.last_error = self.error

    class Reconciled(TurnlogAggregate.Event):
        """What a reconcile hook (or an operator) found out about an unknown send: `verdict` is
        delivered, not_delivered (resent without the recovered-reply prefix) or unknown (still)."""

        TOPIC = "turnlog:DeliveryReconciled"
        verdict: str

        def apply(self, d: "Delivery") -> None:
            if self.verdict == "delivered":
                d.state = "delivered"
            elif self.verdict == "not_delivered":
                d.state = "failed"
                d.known_unsent = True

    class DeadLettered(TurnlogAggregate.Event):
        """Given up on by turnlog itself (`reason`: max_attempts, too_old): held for an operator."""

        TOPIC = "turnlog:DeliveryDeadLettered"
        reason: str

        def apply(self, d: "Delivery") -> None:
            d.state = "dead"
            d.last_error = d.last_error if d.last_error is not None else self.reason

    class Retried(TurnlogAggregate.Event):
        """An operator gave a dead (or failed, or unknown) row `attempts` more attempts."""

        TOPIC = "turnlog:DeliveryRetried"
        attempts: int

        def apply(self, d: "Delivery") -> None:
            d.state = "failed"
            d.attempt_floor = d.attempts
            d.granted = self.attempts

    class Abandoned(TurnlogAggregate.Event):
        TOPIC = "turnlog:DeliveryAbandoned"
        reason: str

        def apply(self, d: "Delivery") -> None:
            d.state = "abandoned"

    @property
    def finished(self) -> bool:
        return self.state in ("delivered", "abandoned")

    @property
    def idempotency_key(self) -> str:
        return idempotency_key(self.id)

    def attempt_limit(self, max_attempts: int = MAX_ATTEMPTS) -> int:
        return self.attempt_floor + (self.granted if self.granted is not None else max_attempts)

    def out_of_attempts(self, max_attempts: int = MAX_ATTEMPTS) -> bool:
        return self.attempts >= self.attempt_limit(max_attempts)

    @property
    def settled(self) -> bool:
        return self.finished

    def attempt(self, owner: str, *, at: datetime, actor: str, cause: str, max_attempts: int = MAX_ATTEMPTS) -> int:
        if self.finished:
            raise DeliveryStateError(f"delivery {self.session_id}#{self.seq} is already {self.state}")
        if self.state == "dead":
            raise DeliveryStateError(f"delivery {self.session_id}#{self.seq} is dead: retry it first "
                                     "(turnlog ledger retry)")
        if self.out_of_attempts(max_attempts):
            raise DeliveryStateError(f"delivery {self.session_id}#{self.seq} used all "
                                     f"{self.attempt_limit(max_attempts)} attempts")
        # Any earlier attempt may have reached the user: a resend says so visibly, unless it is
        # known not to have arrived.
        recovered = self.state != "pending" and not self.known_unsent
        self.record(Delivery.Attempting, at=at, actor=actor, cause=cause, owner=owner,
                    attempt=self.attempts + 1, recovered=recovered)
        return self.attempts

    @property
    def refers_to_message(self) -> bool:
        """Its words are the transcript message at (session_id, seq), not a copy in its own event."""
        return self.content is None

    def outbound_text(self, message: str | None = None) -> str:
        """What to send: its words (its own, or `message`, the words of the transcript message it
        refers to), with the recovered-reply prefix on a resend."""
        text = self.content if self.content is not None else message
        if text is None:
            raise DeliveryStateError(f"delivery {self.session_id}#{self.seq} refers to its transcript message: "
                                     "its words must be given")
        return RECOVERED_PREFIX + text if self.recovered else text

    def delivered(self, *, at: datetime, actor: str, cause: str) -> None:
        if self.state != "attempting":
            raise DeliveryStateError(f"delivery {self.session_id}#{self.seq} is {self.state}, not attempting")
        self.record(Delivery.Delivered, at=at, actor=actor, cause=cause, attempt=self.attempts,
                    recovered=self.recovered)

    def failed(self, error: str, *, at: datetime, actor: str, cause: str, max_attempts: int = MAX_ATTEMPTS) -> None:
        if self.state != "attempting":
            raise DeliveryStateError(f"delivery {self.session_id}#{self.seq} is {self.state}, not attempting")
        self.record(Delivery.Failed, at=at, actor=actor, cause=cause, attempt=self.attempts, error=error[:500])
        if self.out_of_attempts(max_attempts):
            self.record(Delivery.DeadLettered, at=at, actor=actor, cause=cause, reason="max_attempts")

    def outcome_unknown(self, error: str, *, at: datetime, actor: str, cause: str) -> None:
        if self.state != "attempting":
            raise DeliveryStateError(f"delivery {self.session_id}#{self.seq} is {self.state}, not attempting")
        self.record(Delivery.OutcomeUnknown, at=at, actor=actor, cause=cause, attempt=self.attempts,
                    error=error[:500])

    def mark_unsure(self, *, at: datetime, actor: str, cause: str) -> None:
        self.record(Delivery.MarkedUnsure, at=at, actor=actor, cause=cause)

    def reconcile(self, verdict: str, *, at: datetime, actor: str, cause: str) -> None:
        if verdict not in VERDICTS.values():
            raise DeliveryStateError(f"unknown verdict {verdict!r} (known: {', '.join(VERDICTS.values())})")
        if self.state != "unknown":
            raise DeliveryStateError(f"delivery {self.session_id}#{self.seq} is {self.state}, not unknown")
        self.record(Delivery.Reconciled, at=at, actor=actor, cause=cause, verdict=verdict)

    def dead_letter(self, reason: str, *, at: datetime, actor: str, cause: str) -> None:
        if not self.finished and self.state != "dead":
            self.record(Delivery.DeadLettered, at=at, actor=actor, cause=cause, reason=reason)

    def retry(self, attempts: int, *, at: datetime, actor: str, cause: str) -> None:
        if self.finished or self.state in ("pending", "attempting"):
            raise DeliveryStateError(f"delivery {self.session_id}#{self.seq} is {self.state}: nothing to retry")
        if not isinstance(attempts, int) or isinstance(attempts, bool) or not 1 <= attempts <= MAX_GRANT:
            raise DeliveryStateError(f"attempts must be a positive integer up to {MAX_GRANT}, got {attempts!r}")
        self.record(Delivery.Retried, at=at, actor=actor, cause=cause, attempts=attempts)

    def abandon(self, reason: str, *, at: datetime, actor: str, cause: str) -> None:
        """Anything not finished; a row already finished stays as it is."""
        if not self.finished:
            self.record(Delivery.Abandoned, at=at, actor=actor, cause=cause, reason=reason)
