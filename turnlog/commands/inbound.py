"""Inbound messages: accept durably, then run queued items as turns, one at a time per key.

A turn is: route the item (the policy decides here), take the session's lease while starting
the item and appending the user message in the same transaction, ask the responder for a
reply, save the reply with its delivery obligation, deliver it, and finally settle the
delivery, complete the item and release the lease in one transaction.
"""

from __future__ import annotations

from asyncio import CancelledError
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence
from uuid import UUID

from ..domain.dedup import COMMAND, DuplicateInbound
from ..domain.inbox import HUMAN, WAKEUP, Inbox, InboxFull, InboxItem, inbox_id
from ..domain.lease import LeaseHeld, TurnLease
from ..domain.recovery import answered_items
from ..domain.keys import RoutingKey
from ..domain.reply import completed_tool_calls
from ..domain.source import SessionSource
from ..domain.transcript import MessageAppended
from ..errors import InvalidRequest, QueueFull, TurnCancelled
from .context import CommandContext
from .dedup import InboundDedup
from .delivery import DeliveryCommands, Sender
from .keeper import Keeper, RunningTurn, run_as
from .replies import write_rich
from .obligation import reply_obligation
from .routing import RouteResult, RoutingCommands, actor_of, origin_of
from .turns import LeaseToken, TurnCommands

# The agent: given the session's transcript so far (ending with this turn's user message) and the
# inbound item, returns the reply text, or a rich reply (domain/reply.py: messages, a list, a generator).
Responder = Callable[[Sequence[MessageAppended], InboxItem], Any]


class _NothingPending(Exception):
    """Another worker took the last pending item while this one waited for the lease."""


@dataclass(frozen=True)
class Accepted:
    route_id: str
    session_key: str
    item_id: str
    merged: bool
    depth: int
    position: int
    # Why the message was refused as a repeat (message_id | same_text), None when it was accepted;
    # item_id is then the item its first sighting went into, when known.
    duplicate: str | None = None


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


@dataclass(frozen=True)
class StartedTurn:
    token: LeaseToken
    session_key: str
    inbox_uuid: UUID
    item: InboxItem
    cause: str
    user_seq: int
    routed: RouteResult

    def outcome(self, state: str | None, reply_seq: int) -> TurnOutcome:
        t = self.token
        return TurnOutcome(self.session_key, t.session_id, self.item.item_id, t.epoch, t.turn_id, self.user_seq,
                           reply_seq, state, self.routed.created, self.routed.reason)


class InboundCommands:
    def __init__(self, ctx: CommandContext, routing: RoutingCommands, turns: TurnCommands,
                 deliveries: DeliveryCommands, *, keeper: Keeper | None = None) -> None:
        self.ctx = ctx
        self.routing = routing
        self.turns = turns
        self.deliveries = deliveries
        self.dedup = InboundDedup(ctx)
        self.keeper = keeper  # renews the running turns' leases

    def inbox(self, rk: RoutingKey, fresh: bool = True) -> Inbox | None:
        return self.ctx.get(inbox_id(rk.route_id), fresh)

    def _inbox_or_new(self, rk: RoutingKey, actor: str, cause: str) -> Inbox:
        inbox = self.inbox(rk, fresh=False)
        if inbox is None:
            inbox = Inbox.new(Inbox.Created, id=inbox_id(rk.route_id), at=self.ctx.clock.now(), actor=actor,
                                cause=cause, route_id=str(rk.route_id), session_key=rk.key)
        return inbox

    def _accepting(self, rk: RoutingKey, source: SessionSource, text: str, kind: str, actor: str,
                   cause: str, reply: str | None = None, *, first_try: bool = False) -> tuple[Inbox, str, list[Any]]:
        """The inbox with the message accepted (pending event), the item it went into, and the
        first sighting of its message id: all to be saved together. Raises DuplicateInbound
        (on a first try, a seen message id shows as a conflict of the save instead)."""
        if not isinstance(text, str):
            raise InvalidRequest("inbound text must be a string")
        if reply is not None and not isinstance(reply, str):
            raise InvalidRequest("a recorded reply must be a string")
        inbox = self._inbox_or_new(rk, actor, cause)
        source_dict = {**origin_of(source), "message_id": source.message_id}
        self.dedup.check(rk, inbox, kind, text, source_dict, look_up_id=not first_try)
        try:
            item_id = inbox.accept(kind, text, message_id=source.message_id, source=source_dict,
                                   at=self.ctx.clock.now(), actor=actor, cause=cause, reply=reply)
        except InboxFull as full:
            self.ctx.save(inbox)  # the refusal is part of the record
            raise QueueFull(str(full)) from None
        return inbox, item_id, self.dedup.first_sighting(rk, kind, source_dict, item_id, actor, cause)

    def _refusing(self, rk: RoutingKey, kind: str, duplicate: DuplicateInbound, actor: str,
                  cause: str) -> Accepted:
        """Record a repeat as refused (never run) on the key's inbox."""
        def step() -> Accepted:
            inbox = self.dedup.refuse(self._inbox_or_new(rk, actor, cause), kind, duplicate, actor, cause)
            position = self.ctx.save(inbox)
            return Accepted(str(rk.route_id), rk.key, duplicate.duplicate_of or "", False, inbox.depth, position,
                            duplicate.reason)
        return self.ctx.retrying(step, f"refusing a duplicate message for {rk.key}")

    def _who(self, source: SessionSource | dict[str, Any], kind: str) -> tuple[str, str]:
        actor = actor_of(source) if kind != WAKEUP else "system:wakeup"
        message_id = source.get("message_id") if isinstance(source, dict) else source.message_id
        cause = f"message:{message_id}" if message_id else f"inbound:{kind}"
        return actor, cause

    def accept(self, source: SessionSource, text: str, *, kind: str = HUMAN, actor: str | None = None,
               cause: str | None = None, reply: str | None = None) -> Accepted:
        """Record an inbound message before anything else is done with it (a repeat is refused).

        `reply`: a reply already given to it (replayed traffic), recorded by whichever turn runs it.
        """
        rk = self.routing.routing_key(source)
        default_actor, default_cause = self._who(source, kind)
        actor, cause = actor or default_actor, cause or default_cause

        tries = _Tries()

        def step() -> Accepted:
            inbox, item_id, seen = self._accepting(rk, source, text, kind, actor, cause, reply,
                                                   first_try=tries.first())
            position = self.ctx.save(inbox, *seen)
            return Accepted(str(rk.route_id), rk.key, item_id, item_id != str(inbox.accepted), inbox.depth,
                            position)
        try:
            return self.ctx.retrying(step, f"accepting a message for {rk.key}")
        except DuplicateInbound as duplicate:
            return self._refusing(rk, kind, duplicate, actor, cause)

    def claim_command(self, source: SessionSource, name: str, *, actor: str, cause: str) -> Accepted | None:
        """A slash command's message id, claimed before it runs: None the first time, the refusal of a
        repeat after (a redelivered /new must not reset twice). At most once: a crash between the
        claim and the command's own transaction loses that command rather than doubling it."""
        rk = self.routing.routing_key(source)
        origin = {**origin_of(source), "message_id": source.message_id}

        tries = _Tries()

        def step() -> None:
            self.dedup.check(rk, None, COMMAND, name, origin, look_up_id=not tries.first())
            self.ctx.save(*self.dedup.first_sighting(rk, COMMAND, origin, name, actor, cause))
        try:
            self.ctx.retrying(step, f"claiming a command for {rk.key}")
        except DuplicateInbound as duplicate:
            return self._refusing(rk, COMMAND, duplicate, actor, cause)
        return None

    def handle_message(self, source: SessionSource, text: str, responder: Responder, sender: Sender, *,
                       kind: str = HUMAN, timeout: float | None = None) -> list[TurnOutcome]:
        """Accept a message and run turns until the key's queue is empty (what a gateway loop does).

        Accepting and routing commit together: the message is durable before any other work. When
        the key is idle its turn starts in that same transaction (_start_at_once): one commit less.
        """
        rk = self.routing.routing_key(source)
        actor, cause = self._who(source, kind)
        accepted: list[str] = []
        tries = _Tries()
        batched = kind == HUMAN and self.ctx.config.text_batching.applies(source.platform)
        at_once: list[Any] = []

        def accept_too(session_id: str, new_session: bool) -> list[Any]:
            inbox, item_id, seen = self._accepting(rk, source, text, kind, actor, cause, first_try=tries.first())
            accepted[:] = [item_id]
            at_once[:] = [] if batched else self._start_at_once(rk, inbox, item_id, session_id, source, new_session)
            return [inbox, *seen, *at_once[:3]]

        try:
            routed = self.routing.get_or_create_session(source, actor=actor, cause=cause, also=accept_too, rk=rk)
        except DuplicateInbound as duplicate:
            self._refusing(rk, kind, duplicate, actor, cause)
            return []  # a repeat never runs (nor routes: a redelivered message must not touch the session)
        if batched:
            return []  # it waits for the rest of its burst: run_due_batches runs it (commands/batching.py)
        outcomes = []
        if at_once:
            lease, _, _, (token, item, item_cause, seq) = at_once
            self.turns.adopt(token, lease)
            turn = StartedTurn(token, rk.key, inbox_id(rk.route_id), item, item_cause, seq, routed)
            outcome: TurnOutcome | None = self.run_started(turn, responder, sender)
        else:
            outcome = self.run_next(source, responder, sender, timeout=timeout, routed=routed, rk=rk)
        while outcome is not None:
            outcomes.append(outcome)
            # The queue as this process last wrote it (the turn's own finish): a message another
            # process accepted meanwhile is run by that process's own handle_message.
            outcome = self.run_next(source, responder, sender, timeout=timeout, cached=True, rk=rk)
        return outcomes

    def run_next(self, source: SessionSource, responder: Responder, sender: Sender, *, generation: int = 0,
                 timeout: float | None = None, routed: RouteResult | None = None,
                 cached: bool = False, rk: RoutingKey | None = None) -> TurnOutcome | None:
        """Run the oldest pending item of the source's key as one turn; None when nothing waits.

        `routed` is this key's routing decision when the caller has just made it; `cached`: the
        queue as this process last saw it will do (handle_message after its own turn); `rk`: the
        source's routing key, when the caller has it.
        """
        turn = self.begin_next(source, generation=generation, timeout=timeout, routed=routed, cached=cached, rk=rk)
        if turn is None:
            return None
        return self.run_started(turn, responder, sender)

    def run_started(self, turn: "StartedTurn", responder: Responder, sender: Sender) -> TurnOutcome:
        """The rest of a started turn: the agent's reply, saved, delivered and settled."""
        state, reply_seq = self._respond(turn.token, turn.session_key, turn.inbox_uuid, turn.item, responder,
                                         sender, turn.cause)
        return turn.outcome(state, reply_seq)

    def begin_next(self, source: SessionSource, *, generation: int = 0, timeout: float | None = None,
                   routed: RouteResult | None = None, cached: bool = False,
                   rk: RoutingKey | None = None) -> "StartedTurn | None":
        """A turn's first step: route the key's oldest pending item, take the lease, start the item
        and append its user message (one transaction). The asyncio API runs the agent after it."""
        rk = rk or self.routing.routing_key(source)
        # Just routed here: this process saved the inbox with the accept, so its cached copy is
        # current unless another writer moved it, which start_turn's save then refuses (a retry reads afresh).
        inbox = self.inbox(rk, fresh=routed is None and not cached)
        pending = inbox.pending() if inbox is not None else []
        if not pending:
            return None
        head = pending[0]
        started: dict[str, Any] = {}

        def start_turn_on(session_id: str) -> Callable[[TurnLease, LeaseToken], Iterable[Any]]:
            def start_turn(lease: TurnLease, token: LeaseToken) -> Iterable[Any]:
                # Chosen only now that the lease is ours: another worker may have taken the head meanwhile.
                fresh = self.inbox(rk, fresh=False)
                waiting = fresh.pending() if fresh is not None else []
                if not waiting:
                    raise _NothingPending
                assert fresh is not None  # it has items waiting
                item = waiting[0]
                seq, message, cause = self._start_item(lease, token, fresh, item, source, session_id)
                started.update(item=item, seq=seq, inbox=fresh, cause=cause)
                return [fresh, message]
            return start_turn

        cause = f"inbound:{head.item_id}"
        if routed is None:
            head_source = SessionSource.from_dict(head.source) if head.source else source
            actor, _ = self._who(head_source, head.kind)
            at_once: list[Any] = []

            def start_too(session_id: str, new_session: bool) -> list[Any]:
                # The lease is free: the turn starts in the routing decision's own transaction.
                def acquiring(fresh: bool) -> tuple[TurnLease, LeaseToken]:
                    return self.turns.acquiring(session_id, rk.key, generation=generation, actor=self.turns.owner,
                                                cause=cause, reserve_seq=True, new_session=new_session, fresh=fresh)
                try:
                    lease, token = acquiring(False)
                except LeaseHeld:  # as this process last saw it: look at the log before waiting
                    lease, token = acquiring(True)
                events = list(start_turn_on(session_id)(lease, token))
                at_once[:] = [lease, token]
                return [lease, *events]
            try:
                routed = self.routing.get_or_create_session(head_source, actor=actor, cause=cause, also=start_too)
            except LeaseHeld:  # nothing was saved: route on its own, then wait for the lease
                routed = self.routing.get_or_create_session(head_source, actor=actor, cause=cause)
            except _NothingPending:
                return None
            else:
                lease, token = at_once
                self.turns.adopt(token, lease)
                return StartedTurn(token, rk.key, inbox_id(rk.route_id), started["item"], started["cause"],
                                   started["seq"], routed)
        try:
            token = self.turns.acquire(routed.session_id, rk.key, generation=generation, timeout=timeout,
                                       actor=self.turns.owner, cause=cause,
                                       before_save=start_turn_on(routed.session_id), reserve_seq=True)
        except _NothingPending:
            return None
        return StartedTurn(token, rk.key, inbox_id(rk.route_id), started["item"], started["cause"], started["seq"],
                           routed)

    def _start_item(self, lease: TurnLease, token: LeaseToken, inbox: Inbox, item: InboxItem,
                    source: SessionSource, session_id: str) -> tuple[int, MessageAppended, str]:
        """Start `item` under the pending lease, whose acquisition reserved the user message's seq
        (reserve_seq): the inbox marks it started. Returns that seq, the message event and the cause."""
        actor, _ = self._who(item.source or source, item.kind)
        cause = f"inbound:{item.item_id}"
        inbox.start(item.item_id, session_id=session_id, turn_id=token.turn_id, at=self.ctx.clock.now(), actor=actor,
                    cause=cause)
        seq = lease.last_seq
        message = self.turns.message_event(token, seq, "user", item.text, actor=actor, cause=cause,
                                           platform_message_id=item.message_ids[-1])
        return seq, message, cause

    def _start_at_once(self, rk: RoutingKey, inbox: Inbox, item_id: str, session_id: str,
                       source: SessionSource, new_session: bool) -> list[Any]:
        """When the key is idle (this message alone waits, no turn in flight, the lease free), its
        turn starts in the accept's own transaction: [lease, the inbox with the item started, user
        message, the started turn]. The start is recorded on a copy of the inbox, so that it follows
        the lease's acquisition in the log, as on the two-transaction path.
        Otherwise nothing, and the turn starts after the accept commits, as it waits for the lease.
        Either way the message is durable before the agent sees it; the save validates the cached
        lease and inbox, so another taker makes it conflict and the step runs again."""
        pending = inbox.pending()
        if len(pending) != 1 or pending[0].item_id != item_id or inbox.in_flight():
            return []
        try:
            lease, token = self.turns.acquiring(session_id, rk.key, actor=self.turns.owner, cause=f"inbound:{item_id}",
                                                reserve_seq=True, new_session=new_session)
        except LeaseHeld:
            return []
        item = pending[0]
        starting = inbox.clone()
        seq, message, cause = self._start_item(lease, token, starting, item, source, session_id)
        return [lease, starting, message, (token, item, cause, seq)]

    def _respond(self, token: LeaseToken, session_key: str, inbox_uuid: UUID | None, item: InboxItem,
                 responder: Responder, sender: Sender, cause: str) -> tuple[str | None, int]:
        """Ask the responder while the keeper renews the lease; write and deliver its reply."""
        running = self.keeper.keep(token) if self.keeper is not None else None
        reply_seq = self.turns.next_seq(token)
        try:
            reply = run_as(running, lambda: responder(LazyTranscript(self.turns, token.session_id), item))
            if not isinstance(reply, str):
                return run_as(running, lambda: write_rich(self, token, session_key, inbox_uuid, item, reply,
                                                          sender, cause))
            return self._reply_and_deliver(token, session_key, inbox_uuid, item, reply, sender, cause), reply_seq
        except BaseException as failure:
            self._fail_turn(token, inbox_uuid, item, cause)  # a no-op once the turn was released
            raise _cancelled(running, failure) from failure

    def _fail_turn(self, token: LeaseToken, inbox_uuid: UUID | None, item: InboxItem, cause: str) -> None:
        """The agent raised: release the lease and close the item, so the key is not wedged.

        A turn that had lost its lease (cut off: revoked, or taken over after a stall) leaves its
        item alone: /stop and /new closed it already, and after a takeover its user message is in
        the transcript, so the next turn on the session that completes answers it (see finish in
        _reply_and_deliver: answered_by_later_turn); a dead boot's is recovery's."""
        def step() -> None:
            now = self.ctx.clock.now()
            items: list[Any] = []
            lease = self.turns.release_event(token, "failed", cause=cause)
            if lease is not None:
                items.append(lease)
            inbox = self.ctx.get(inbox_uuid) if inbox_uuid is not None and lease is not None else None
            if inbox is not None and any(i.item_id == item.item_id for i in inbox.in_flight()):
                inbox.complete(item.item_id, "failed", at=now, actor=self.turns.owner, cause=cause)
                items.append(inbox)
            if items:
                self.ctx.save(*items)
        self.ctx.retrying(step, f"failing the turn on {token.session_id}")
        self.turns._forget(token)

    def _reply_and_deliver(self, token: LeaseToken, session_key: str, inbox_uuid: UUID | None, item: InboxItem,
                           reply: str, sender: Sender, cause: str, *, fields: dict[str, Any] | None = None,
                           also: Sequence[Any] = (), finish_turn: bool = True) -> str | None:
        """Save the reply with its obligation, send it, then (finish_turn) settle, complete and release.
        `fields` are the message's other fields, `also` events saved with it (a rich reply's usage)."""
        owner = self.turns.owner
        seq = self.turns.next_seq(token)
        reply_event = self.turns.message_event(token, seq, "assistant", reply, cause=cause, **(fields or {}))
        # Recorded and marked attempting in one transaction, right before the send: a crash in
        # between leaves an attempt whose outcome is unknown, which a resend marks as recovered.
        delivery = reply_obligation(self.deliveries, token, seq, reply, session_key=session_key, reply_to=item.source,
                                    internal=item.kind == WAKEUP, inbound_message_id=item.message_ids[-1],
                                    cause=cause, attempting=True)
        self.turns.fenced_save(token, reply_event, *([delivery] if delivery else []), *also, last_seq=seq,
                               cause=cause)

        error = None
        if delivery is not None:
            try:
                sender(delivery.outbound_text)
            except Exception as e:  # noqa: BLE001 - any adapter failure is a failed attempt
                error = f"{type(e).__name__}: {e}"

        def finish() -> list[Any]:
            now = self.ctx.clock.now()
            lease = self.turns.release_event(token, "completed", cause=cause)
            items: list[Any] = [lease] if lease is not None else []
            session = self.ctx.session(token.session_id)
            resumed = session is not None and session.resume_pending
            if session is not None and resumed:
                # A completed turn is what ends an interruption (seed 002 §7).
                session.clear_resume_pending(at=now, actor=owner, cause=cause)
                items.append(session)
            inbox = self.ctx.get(inbox_uuid, fresh=False) if inbox_uuid is not None else None
            if inbox is not None:
                for item_id, outcome in answered_items(inbox.in_flight(), item.item_id, token.session_id,
                                                       resumed or lease is not None):
                    inbox.complete(item_id, outcome, at=now, actor=owner, cause=cause)
                items.append(inbox)
            return items

        if not finish_turn:
            return self.deliveries.settle(delivery.id, error=error, cause=cause).state if delivery else None
        if delivery is None:
            self.ctx.retrying(lambda: self.ctx.save(*finish()), f"finishing a turn on {session_key}")
            state = None
        else:
            state = self.deliveries.settle(delivery.id, error=error, also=finish, cause=cause, fresh=False).state
        self.turns._forget(token)
        return state


class _Tries:
    """Whether a retried step is on its first try (see InboundDedup.check's look_up_id)."""

    def __init__(self) -> None:
        self.count = 0

    def first(self) -> bool:
        self.count += 1
        return self.count == 1


RESUME_NOTES = {
    "restart_timeout": "a gateway restart",
    "shutdown_timeout": "a gateway shutdown",
}


def resume_note(reason: str | None, completed_tools: Sequence[str] = ()) -> str:
    cause = RESUME_NOTES.get(reason or "", "a gateway interruption")
    done = (f" These tool calls completed before the interruption and their results are above:"
            f" {', '.join(completed_tools)}." if completed_tools else "")
    return (f"[System note: your previous turn was interrupted by {cause}.{done} Continue the interrupted task; "
            "do not re-run tool calls that already completed. If there is nothing to continue, say briefly "
            "that the session was restored and ask what to do next.]")


def _cancelled(running: RunningTurn | None, failure: BaseException) -> BaseException:
    """A failure caused by the keeper cancelling the turn is reported as TurnCancelled."""
    if running is None or not running.cancel.cancelled or isinstance(failure, TurnCancelled):
        return failure
    if isinstance(failure, (Exception, CancelledError)):
        return TurnCancelled(f"the turn was cancelled: {running.cancel.reason}")
    return failure


def resume(inbound: "InboundCommands", *, session_id: str, session_key: str, reason: str | None,
           in_flight: tuple[UUID, InboxItem] | None, responder: Responder, sender: Sender,
           timeout: float | None = None) -> TurnOutcome | None:
    """Run the one resumed turn of an interrupted session: a system note instead of empty text.

    None when, by the time the lease is ours, the session no longer waits to be resumed: a turn on
    it completed meanwhile (an inbound message raced the auto-resume, #45456), the sweep delivered
    its reply, or it was suspended or ended. Checked under the lease, so it is never resumed twice.
    """
    turns = inbound.turns
    note = resume_note(reason, completed_tool_calls(_last_turn(turns, session_id)))
    cause = f"resume:{reason or 'interrupted'}"
    started: dict[str, int] = {}

    def start_turn(lease: TurnLease, token: LeaseToken) -> Iterable[Any]:
        session = inbound.ctx.session(session_id, fresh=True)
        if session is None or not session.resume_pending or session.suspended or session.ended:
            raise _NothingPending
        seq = lease.last_seq  # reserved by the acquisition
        message = turns.message_event(token, seq, "system", note, actor="system:recovery", cause=cause)
        started["seq"] = seq
        return [message]

    try:
        token = turns.acquire(session_id, session_key, timeout=timeout, actor="system:recovery", cause=cause,
                              before_save=start_turn, reserve_seq=True)
    except _NothingPending:
        return None
    if in_flight is not None:
        inbox_uuid, item = in_flight
    else:
        inbox_uuid, item = None, InboxItem("resume", WAKEUP, (note,), (None,), inbound.ctx.clock.now(), True,
                                           session_id, token.turn_id, None)
    state, reply_seq = inbound._respond(token, session_key, inbox_uuid, item, responder, sender, cause)
    return TurnOutcome(session_key, session_id, item.item_id, token.epoch, token.turn_id, started["seq"],
                       reply_seq, state, False, "resumed")


def _last_turn(turns: TurnCommands, session_id: str) -> list[MessageAppended]:
    """The messages of the session's last turn (its newest epoch), oldest first."""
    tail = turns.transcript(session_id, newest_first=True, limit=100)
    return list(reversed([m for m in tail if m.epoch == tail[0].epoch])) if tail else []


class LazyTranscript(Sequence[MessageAppended]):
    """The session's transcript, read from the log only if the responder looks at it."""

    def __init__(self, turns: TurnCommands, session_id: str) -> None:
        self._turns = turns
        self._session_id = session_id
        self._messages: list[MessageAppended] | None = None

    def _load(self) -> list[MessageAppended]:
        if self._messages is None:
            self._messages = self._turns.transcript(self._session_id)
        return self._messages

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        return self._load()[index]

    def __len__(self) -> int:
        return len(self._load())
