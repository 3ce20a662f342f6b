"""A turn: begun under the session's lease, then answered by the responder, or failed.

A turn begins when the lease's acquisition is saved in one transaction with what starts it: its
item marked started and its opening message, at the seq the acquisition reserved. So a message is
never in the transcript without a turn that owns it. `respond` asks the responder while the keeper
renews the lease, saves the reply with its delivery obligation, sends it, and finally settles the
delivery, completes the item and releases the lease in one transaction. `fail` releases the lease
and closes the item, so the key is never wedged.

A rich reply (domain/reply.py) is saved message by message as it arrives — a generator responder
is advanced only after the previous message is in the log — so a turn killed in the middle of a
tool loop keeps every tool call and result it made, and a resumed turn sees them. Tool calls and
tool results are fenced transcript writes; an assistant message for the user is held until the
next message shows it was not the last, then saved with its delivery obligation and sent (its own
ledger row); the last one is the turn's answer and finishes the turn as a plain reply does.
"""

from __future__ import annotations

import threading
import time
from asyncio import CancelledError
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence
from uuid import UUID

from ..domain.delivery import Delivery
from ..domain.inbox import WAKEUP, Inbox, InboxItem
from ..domain.lease import TurnLease
from ..domain.recovery import answered_items
from ..domain.reply import ReplyMessage, messages_of, usage_event
from ..domain.silence import outbound_for_reply
from ..domain.transcript import MessageAppended
from ..errors import InvalidRequest, LeaseTimeout, TurnCancelled, TurnlogClosed
from .agent_history import read_agent_history
from .context import CommandContext
from .delivery import DeliveryCommands, Sender, send_once
from .keeper import Keeper, RunningTurn, run_as
from .lease import LeaseCommands, LeaseToken
from .recorder import Stopwatch

# The agent: given the session's transcript so far (ending with this turn's user message) and the
# inbound item, returns the reply text, or a rich reply (domain/reply.py: messages, a list, a generator).
Responder = Callable[[Sequence[MessageAppended], InboxItem], Any]


@dataclass(frozen=True)
class TurnOutcome:
    session_key: str
    session_id: str
    item_id: str
    epoch: int
    turn_id: str
    user_seq: int
    reply_seq: int
    delivery_state: str | None  # None when nothing was owed (silence on an internal turn)
    created_session: bool
    reason: str | None


class NothingToStart(Exception):
    """By the time the lease was ours there was nothing left for this turn to start."""


@dataclass(frozen=True)
class Start:
    """What starts a turn: the item it answers, its opening message (at the seq the lease's
    acquisition reserved, after the answers of tool calls the last turn left cut off, if any:
    commands/tool_answers.py) and the inbox with the item marked started (None when the item was
    started before: a resumed turn)."""

    item: InboxItem
    message: MessageAppended
    inbox: Inbox | None
    cause: str
    answers: tuple[MessageAppended, ...] = ()

    @property
    def seq(self) -> int:
        return int(self.message.originator_version)


# Builds the Start once the lease is (about to be) ours; raises NothingToStart when nothing is left.
StartFn = Callable[[TurnLease, LeaseToken], Start]


@dataclass(frozen=True)
class Starting:
    """A turn's start before it is saved: the lease with its acquisition pending, the token that
    acquisition gives, and what starts the turn."""

    lease: TurnLease
    token: LeaseToken
    start: Start

    def events(self) -> list[Any]:
        """To save together, the lease first: the item's start follows the lease's acquisition in the log."""
        inbox = [self.start.inbox] if self.start.inbox is not None else []
        return [self.lease, *inbox, *self.start.answers, self.start.message]


@dataclass
class TurnState:
    """A begun turn: what respond and fail work from."""

    token: LeaseToken
    session_key: str
    inbox_uuid: UUID | None
    item: InboxItem
    cause: str
    user_seq: int
    created_session: bool = False
    reason: str | None = None
    running: RunningTurn | None = None  # the keeper's registration, once it renews the lease


CLOSED = "the Turnlog was closed while the turn ran: its lease was released and its item failed"


class RunningTurns:
    """This engine's turns, from the moment one is made until it ends, so that closing the engine
    can wait for them and cancel those that outlast the wait."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._turns: set[Turn] = set()
        self.closed = False

    def add(self, turn: "Turn") -> None:
        with self._changed:
            if self.closed:
                raise TurnlogClosed("the Turnlog is closed: no turn starts")
            self._turns.add(turn)

    def discard(self, turn: "Turn") -> None:
        with self._changed:
            self._turns.discard(turn)
            self._changed.notify_all()

    def close(self, wait_s: float) -> list["Turn"]:
        """Refuse new turns, wait up to `wait_s` s for the running ones to end, and return those
        still running. A turn responding in the calling thread (an agent closing its own engine)
        is not waited for: it cannot end while its thread waits."""
        deadline = time.monotonic() + max(wait_s, 0.0)
        caller = threading.get_ident()
        with self._changed:
            self.closed = True
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or all(t.thread == caller for t in self._turns):
                    return list(self._turns)
                self._changed.wait(remaining)


@dataclass(frozen=True)
class TurnParts:
    """What every turn works with."""

    ctx: CommandContext
    leases: LeaseCommands
    deliveries: DeliveryCommands
    keeper: Keeper | None = None
    running: RunningTurns = field(default_factory=RunningTurns)


@dataclass
class _Waiting:
    """One wait for the lease: what its last try would start, saved with the acquisition."""

    start: StartFn
    made: Start | None = None

    def __call__(self, lease: TurnLease, token: LeaseToken) -> list[Any]:
        self.made = self.start(lease, token)
        return Starting(lease, token, self.made).events()[1:]  # the lease is saved by the acquisition


class Turn:
    """One turn on one session of a routing key. It begins either by waiting for the lease (`begin`)
    or inside a caller's own transaction (`starting`, saved by the caller, then `begun`); then it
    is answered (`respond`) or failed (`fail`)."""

    def __init__(self, parts: TurnParts, session_key: str, inbox_uuid: UUID | None, *,
                 stop: threading.Event | None = None) -> None:
        """`stop`: set by the caller going away, or by the engine closing, before the turn began."""
        self.parts = parts
        self.session_key = session_key
        self.inbox_uuid = inbox_uuid
        self.stop = stop if stop is not None else threading.Event()
        self.thread: int | None = None  # the thread it responds in (the agent's, for a sync responder)
        self._state: TurnState | None = None
        self._closed_out = False  # the engine's close released it
        self._finish_tried = False  # a try after the first follows a lost race: it reads the session afresh
        self.stopwatch = Stopwatch()  # from routing on: the turn's engine time is what its other parts leave
        parts.running.add(self)

    @property
    def state(self) -> TurnState:
        if self._state is None:
            raise InvalidRequest("the turn has not begun")
        return self._state

    @property
    def token(self) -> LeaseToken:
        return self.state.token

    @property
    def item(self) -> InboxItem:
        return self.state.item

    # -- beginning --------------------------------------------------------------------------

    def begin(self, session_id: str, start: StartFn, *, cause: str, generation: int = 0,
              timeout: float | None = None, actor: str | None = None, created_session: bool = False,
              reason: str | None = None) -> "Turn":
        """Wait up to `timeout` s for the lease (LeaseTimeout) and save its acquisition with what
        `start` starts (NothingToStart: nothing is saved). `stop` set gives the wait up."""
        waiting = _Waiting(start)
        try:
            token = self.parts.leases.acquire(session_id, self.session_key, generation=generation,
                                              timeout=timeout, actor=actor, cause=cause, before_save=waiting,
                                              reserve_seq=True, stop=self.stop)
        except LeaseTimeout:
            if self.parts.running.closed:
                raise TurnlogClosed("the Turnlog was closed while the turn waited for its lease") from None
            raise
        assert waiting.made is not None  # the saved try made it
        self._state = self._begun_state(token, waiting.made, created_session, reason)
        return self

    def starting(self, session_id: str, start: StartFn, *, cause: str, generation: int = 0,
                 new_session: bool = False, fresh: bool = False) -> Starting:
        """The turn's start for a caller that saves it in its own transaction (a routing decision,
        an accept), then calls `begun`. Raises LeaseHeld (without waiting) and NothingToStart.
        `new_session`: the session is created in that same transaction."""
        # Taken in the caller's transaction (within its routing span), without waiting.
        with self.parts.ctx.recorder.span("lease", **{"turnlog.waited": False}):
            lease, token = self.parts.leases.acquiring(session_id, self.session_key, generation=generation,
                                                       cause=cause, fresh=fresh, reserve_seq=True,
                                                       new_session=new_session)
            return Starting(lease, token, start(lease, token))

    def begun(self, starting: Starting, *, created_session: bool = False, reason: str | None = None) -> "Turn":
        """The caller saved `starting`: the lease and the turn are this process's."""
        self.parts.leases.adopt(starting.token, starting.lease)
        self._state = self._begun_state(starting.token, starting.start, created_session, reason)
        return self

    def _begun_state(self, token: LeaseToken, start: Start, created_session: bool, reason: str | None) -> TurnState:
        return TurnState(token, self.session_key, self.inbox_uuid, start.item, start.cause, start.seq,
                         created_session, reason)

    def keep(self) -> RunningTurn | None:
        """Have the keeper renew the lease while the agent works (once per turn)."""
        state = self.state
        if state.running is None and self.parts.keeper is not None:
            state.running = self.parts.keeper.keep(state.token)
        return state.running

    # -- answering ------------------------------------------------------------------------

    def respond(self, responder: Responder, sender: Sender) -> TurnOutcome:
        """Ask the responder while the keeper renews the lease; write, deliver and settle its reply.
        A responder that raises fails the turn (TurnCancelled when the keeper had cancelled it)."""
        if self._closed_out:  # begun, then the engine closed before it was answered: the store is gone
            raise self.fail(TurnlogClosed(CLOSED))
        state = self.state
        leases = self.parts.leases
        self.thread = threading.get_ident()
        running = self.keep()
        reply_seq = leases.next_seq(state.token)
        recorder = self.parts.ctx.recorder
        try:
            with recorder.span("agent"), self.stopwatch.part("agent"):
                reply = run_as(running, lambda: responder(LazyTranscript(leases, state.token.session_id), state.item))
            if not isinstance(reply, str):
                delivery_state, reply_seq = run_as(running, lambda: self._write_rich(reply, sender))
            else:
                delivery_state = self._reply_and_deliver(reply, sender)
        except BaseException as failure:
            recorder.turn_failed(state.token.session_id, state.token.turn_id, failure)
            raise self.fail(failure) from failure
        self.stopwatch.report(recorder)
        return self.outcome(delivery_state, reply_seq)

    def outcome(self, delivery_state: str | None, reply_seq: int) -> TurnOutcome:
        s = self.state
        t = s.token
        return TurnOutcome(s.session_key, t.session_id, s.item.item_id, t.epoch, t.turn_id, s.user_seq, reply_seq,
                           delivery_state, s.created_session, s.reason)

    def drop(self) -> None:
        """The turn will not begin (nothing to start, or its start was not saved)."""
        self.parts.running.discard(self)

    def fail(self, failure: BaseException) -> BaseException:
        """Release the lease and close the item as failed, so the key is not wedged; returns the
        error to raise for `failure` (TurnCancelled when the keeper cancelled the turn, TurnlogClosed
        when the engine was closed meanwhile).

        A turn that had lost its lease (cut off: revoked, or taken over after a stall) leaves its
        item alone: /stop and /new closed it already, and after a takeover its user message is in
        the transcript, so the next turn on the session that completes answers it (see _finish:
        answered_items); a dead boot's is recovery's."""
        try:
            if not self._closed_out:
                self._release_failed()
        except Exception:
            if not self._closed_out:  # else the store may be closed already: close released it
                raise
        finally:
            self.parts.leases.forget(self.state.token)
            self.parts.running.discard(self)
        if self._closed_out:
            return failure if isinstance(failure, TurnlogClosed) else TurnlogClosed(CLOSED)
        return _cancelled(self.state.running, failure)

    def close_out(self) -> None:
        """The engine is closing and this turn outlasted the wait: cancel it (its agent is told
        through its cancel token), release its lease and fail its item, while the store is open."""
        self.stop.set()
        if self._state is None:
            return  # still waiting for its lease: the stop ends the wait
        self._closed_out = True
        if self._state.running is not None:
            self._state.running.cancel.cancel(CLOSED)
        with self.parts.leases.write_lock(self._state.token):  # not in the middle of one of its writes
            self._release_failed()
        self.parts.leases.forget(self._state.token)

    def _release_failed(self) -> None:
        state = self.state
        ctx, leases = self.parts.ctx, self.parts.leases

        def step() -> None:
            now = ctx.clock.now()
            items: list[Any] = []
            lease = leases.release_event(state.token, "failed", cause=state.cause)
            if lease is not None:
                items.append(lease)
            inbox = ctx.get(state.inbox_uuid) if state.inbox_uuid is not None and lease is not None else None
            if inbox is not None and any(i.item_id == state.item.item_id for i in inbox.in_flight()):
                inbox.complete(state.item.item_id, "failed", at=now, actor=leases.owner, cause=state.cause)
                items.append(inbox)
            if items:
                ctx.save(*items)
        ctx.retrying(step, f"failing the turn on {state.token.session_id}")

    def _reply_and_deliver(self, reply: str, sender: Sender, *, fields: dict[str, Any] | None = None,
                           also: Sequence[Any] = (), finish_turn: bool = True) -> str | None:
        """Save the reply with its obligation, send it, then (finish_turn) settle, complete and release.
        `fields` are the message's other fields, `also` events saved with it (a rich reply's usage)."""
        state = self.state
        token, cause, item = state.token, state.cause, state.item
        leases, deliveries = self.parts.leases, self.parts.deliveries
        if self._closed_out:
            raise TurnlogClosed(CLOSED)
        seq = leases.next_seq(token)
        reply_event = leases.message_event(token, seq, "assistant", reply, cause=cause, **(fields or {}))
        # Recorded and marked attempting in one transaction, right before the send: a crash in
        # between leaves an attempt whose outcome is unknown, which a resend marks as recovered.
        delivery = reply_obligation(deliveries, token, seq, reply, session_key=state.session_key, reply_to=item.source,
                                    internal=item.kind == WAKEUP, inbound_message_id=item.message_ids[-1],
                                    cause=cause, attempting=True)
        leases.fenced_save(token, reply_event, *([delivery] if delivery else []), *also, last_seq=seq, cause=cause)

        failure = None
        if delivery is not None:
            with self.parts.ctx.recorder.span("send", **{"turnlog.delivery_id": str(delivery.id)}) as span, \
                    self.stopwatch.part("send"):
                failure = send_once(sender, delivery.outbound_text(reply), key=delivery.idempotency_key)
                span.set_attribute("turnlog.send_failed", failure is not None)
            if failure is not None:
                self.parts.ctx.recorder.send_failed(token.session_id, str(delivery.id), failure.error, failure.unknown)

        if not finish_turn:
            return deliveries.settle_send(delivery.id, failure, cause=cause).state if delivery else None
        if delivery is None:
            self.parts.ctx.retrying(lambda: self.parts.ctx.save(*self._finish()),
                                    f"finishing a turn on {state.session_key}")
            delivery_state = None
        else:
            delivery_state = deliveries.settle_send(delivery.id, failure, also=self._finish, cause=cause,
                                                    fresh=False).state
        leases.forget(token)
        self.parts.running.discard(self)
        return delivery_state

    def _finish(self) -> list[Any]:
        """Release the lease, end an interruption, complete the items this turn answered."""
        state = self.state
        ctx, leases = self.parts.ctx, self.parts.leases
        token, cause, owner = state.token, state.cause, leases.owner
        now = ctx.clock.now()
        lease = leases.release_event(token, "completed", cause=cause)
        items: list[Any] = [lease] if lease is not None else []
        # While the lease is still ours, the first try answers from this process's copy of the
        # session, current unless another process wrote it: recovery, /stop and /new there revoke
        # the lease in the write that marks or ends the session, so the release loses its
        # optimistic-concurrency race and the retry reads the session from the log.
        session = ctx.session(token.session_id, fresh=self._finish_tried or lease is None)
        self._finish_tried = True
        resumed = session is not None and session.resume_pending
        if session is not None and resumed:
            # A completed turn is what ends an interruption (seed 002 §7).
            session.clear_resume_pending(at=now, actor=owner, cause=cause)
            items.append(session)
        inbox = ctx.get(state.inbox_uuid, fresh=False) if state.inbox_uuid is not None else None
        if inbox is not None:
            for item_id, outcome in answered_items(inbox.in_flight(), state.item.item_id, token.session_id,
                                                   resumed or lease is not None):
                inbox.complete(item_id, outcome, at=now, actor=owner, cause=cause)
            items.append(inbox)
        return items

    # -- rich replies ---------------------------------------------------------------------

    def _write_rich(self, reply: Any, sender: Sender) -> tuple[str | None, int]:
        """Returns the delivery state of the answer and its sequence number."""
        held: ReplyMessage | None = None
        try:
            for message in messages_of(reply):
                if held is not None:
                    self._reply_and_deliver(held.content, sender, **self._extra(held), finish_turn=False)
                    held = None
                if message.for_user:
                    held = message
                else:
                    self._append(message)
        except ValueError as bad:
            raise InvalidRequest(f"bad reply from the responder: {bad}") from None
        if held is None:
            raise InvalidRequest("the responder's reply did not end with an assistant message for the user")
        extra = self._extra(held)
        seq = self.parts.leases.next_seq(self.state.token)
        return self._reply_and_deliver(held.content, sender, **extra), seq

    def _extra(self, message: ReplyMessage) -> dict[str, Any]:
        token, leases = self.state.token, self.parts.leases
        seq = leases.next_seq(token)
        usage = usage_event(message, session_id=token.session_id, seq=seq, epoch=token.epoch, turn_id=token.turn_id,
                            at=self.parts.ctx.clock.now(), actor=leases.owner, cause=self.state.cause)
        return {"fields": _fields(message), "also": [usage] if usage is not None else []}

    def _append(self, message: ReplyMessage) -> None:
        token, cause, leases = self.state.token, self.state.cause, self.parts.leases
        if self._closed_out:
            raise TurnlogClosed(CLOSED)
        seq = leases.next_seq(token)
        event = leases.message_event(token, seq, message.role, message.content, cause=cause, **_fields(message))
        leases.fenced_save(token, event, *self._extra(message)["also"], last_seq=seq, cause=cause)


def _fields(message: ReplyMessage) -> dict[str, Any]:
    tokens = message.usage.output_tokens if message.usage is not None else None
    return {"tool_calls": message.tool_calls, "tool_call_id": message.tool_call_id, "name": message.name,
            "finish_reason": message.finish_reason, "token_count": tokens}


def reply_obligation(deliveries: DeliveryCommands, token: LeaseToken, seq: int, content: str, *,
                     session_key: str, reply_to: dict[str, Any] | None, internal: bool,
                     inbound_message_id: str | None, cause: str, attempting: bool = False) -> Delivery | None:
    """The unsaved obligation to deliver the reply at `seq`, to be saved in the same transaction as the
    message; None when nothing is owed (silence on an internal turn). One rule for a turn's reply and
    for `Turnlog.record_reply`, the API of a gateway that runs its own loop. Without `reply_to` the
    reply goes back to the session's origin. `attempting` also marks it attempting, for a send right
    after the save."""
    outbound = outbound_for_reply(content, internal=internal)
    if outbound is None:
        return None
    if not reply_to:
        session = deliveries.ctx.session(token.session_id)
        reply_to = session.origin if session is not None else None
    owner = deliveries.owner
    delivery = deliveries.obligation(
        session_id=token.session_id, seq=seq, session_key=session_key, reply_to=reply_to, content=outbound,
        turn_id=token.turn_id, inbound_message_id=inbound_message_id, actor=owner, cause=cause,
        of_message=outbound == content, attempting=attempting)
    return delivery


def _cancelled(running: RunningTurn | None, failure: BaseException) -> BaseException:
    """A failure caused by the keeper cancelling the turn is reported as TurnCancelled."""
    if running is None or not running.cancel.cancelled or isinstance(failure, TurnCancelled):
        return failure
    if isinstance(failure, (Exception, CancelledError)):
        return TurnCancelled(f"the turn was cancelled: {running.cancel.reason}")
    return failure


class LazyTranscript(Sequence[MessageAppended]):
    """The session's agent history (commands/agent_history.py), read from the log only if the
    responder looks at it."""

    def __init__(self, leases: LeaseCommands, session_id: str) -> None:
        self._leases = leases
        self._session_id = session_id
        self._messages: list[MessageAppended] | None = None

    def _load(self) -> list[MessageAppended]:
        if self._messages is None:
            self._messages = read_agent_history(self._leases.ctx, self._session_id)
        return self._messages

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        return self._load()[index]

    def __len__(self) -> int:
        return len(self._load())
