"""Running a key's queue: its pending items, oldest first, each as one turn (turn.py).

`handle_message` is what a gateway loop does with a message: accept it (inbound.py), then run the
key's turns until its queue is empty. Accepting and routing commit together: the message is
durable before any other work. When the key is idle its turn starts in that same transaction (one
commit less); otherwise the turn waits for the session's lease, and the item it answers is chosen
only once the lease is ours, since another worker may have taken the head meanwhile.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Sequence
from uuid import UUID

from ..domain.dedup import DuplicateInbound
from ..domain.inbox import HUMAN, WAKEUP, Inbox, InboxItem, inbox_id
from ..domain.keys import RoutingKey
from ..domain.lease import LeaseHeld, TurnLease
from ..domain.reply import completed_tool_calls, cut_off_tool_calls
from ..domain.source import SessionSource
from ..domain.transcript import MessageAppended
from .context import CommandContext
from .delegations import OWNER_CLOSED, DelegationCommands
from .delivery import Sender
from .inbound import InboundCommands, Tries
from .lease import LeaseCommands, LeaseToken
from .routing import RouteResult, RoutingCommands
from .tool_answers import answers_before_turn
from .turn import NothingToStart, Responder, Start, Starting, Turn, TurnOutcome, TurnParts


class TurnRunner:
    def __init__(self, inbound: InboundCommands, routing: RoutingCommands, parts: TurnParts,
                 delegations: DelegationCommands | None = None) -> None:
        self.inbound = inbound
        self.routing = routing
        self.parts = parts
        self.delegations = delegations or DelegationCommands(parts.ctx, routing, inbound)

    @property
    def ctx(self) -> CommandContext:
        return self.parts.ctx

    @property
    def leases(self) -> LeaseCommands:
        return self.parts.leases

    def handle_message(self, source: SessionSource, text: str, responder: Responder, sender: Sender, *,
                       kind: str = HUMAN, timeout: float | None = None) -> list[TurnOutcome]:
        """Accept a message and run turns until the key's queue is empty."""
        rk = self.routing.routing_key(source)
        batched = kind == HUMAN and self.ctx.config.text_batching.applies(source.platform)
        with self.ctx.recorder.turn_span(source, rk.key) as span:
            arrived = self._arrive(source, text, kind, rk, start_at_once=not batched, span=span)
            if arrived is None or batched:
                return []  # a repeat never runs; a batched text waits for its burst (batching.py)
            turn, routed = arrived
            if turn is None:
                turn = self.begin_next(source, timeout=timeout, routed=routed, rk=rk)
            outcome: TurnOutcome | None = turn.respond(responder, sender) if turn is not None else None
        outcomes = []
        while outcome is not None:
            outcomes.append(outcome)
            # The queue as this process last wrote it (the turn's own finish): a message another
            # process accepted meanwhile is run by that process's own handle_message.
            outcome = self.run_next(source, responder, sender, timeout=timeout, cached=True, rk=rk)
        return outcomes

    def accept_and_start(self, source: SessionSource, text: str, *, kind: str = HUMAN,
                         stop: threading.Event | None = None) -> Turn | None:
        """Accept a message and, when its key is idle, begin its turn in the same transaction;
        None when it was not begun (a repeat, or the key busy: begin_next waits for the lease).
        `stop` set before the start is made leaves the accepted message pending."""
        arrived = self._arrive(source, text, kind, self.routing.routing_key(source), start_at_once=True, stop=stop)
        return arrived[0] if arrived is not None else None

    def _arrive(self, source: SessionSource, text: str, kind: str, rk: RoutingKey, *, start_at_once: bool,
                span: Any = None, stop: threading.Event | None = None) -> tuple[Turn | None, RouteResult] | None:
        """The accept and routing in one transaction, with the turn's start when the key is idle;
        None for a repeat (recorded as refused)."""
        actor, cause = self.inbound.who(source, kind)
        turn = self._turn(rk, stop)
        arrival = _Arrival(self, turn, rk, source, text, kind, actor, cause, start_at_once=start_at_once)
        try:
            with self.ctx.recorder.span("routing"):
                routed = self.routing.get_or_create_session(source, actor=actor, cause=cause, also=arrival, rk=rk)
        except DuplicateInbound as duplicate:
            turn.drop()
            self.inbound.refuse(rk, kind, duplicate, actor, cause)
            if span is not None:
                span.set_attribute("turnlog.duplicate", duplicate.reason)
            return None  # a repeat never runs (nor routes: a redelivered message must not touch the session)
        except BaseException:
            turn.drop()
            raise
        if span is not None:
            span.set_attribute("gen_ai.conversation.id", routed.session_id)
        if arrival.starting is None:
            turn.drop()
            return None, routed
        return turn.begun(arrival.starting, created_session=routed.created, reason=routed.reason), routed

    def run_next(self, source: SessionSource, responder: Responder, sender: Sender, *, generation: int = 0,
                 timeout: float | None = None, routed: RouteResult | None = None,
                 cached: bool = False, rk: RoutingKey | None = None) -> TurnOutcome | None:
        """Run the oldest pending item of the source's key as one turn; None when nothing waits."""
        rk = rk or self.routing.routing_key(source)
        pending = self._pending(rk, routed, cached)
        if not pending:
            return None
        with self.ctx.recorder.turn_span(source, rk.key) as span:
            turn = self._begin_pending(source, rk, pending, generation, timeout, routed, None)
            if turn is None:
                return None
            span.set_attribute("gen_ai.conversation.id", turn.token.session_id)
            return turn.respond(responder, sender)

    def begin_next(self, source: SessionSource, *, generation: int = 0, timeout: float | None = None,
                   routed: RouteResult | None = None, cached: bool = False,
                   rk: RoutingKey | None = None, stop: threading.Event | None = None) -> Turn | None:
        """Begin the turn of the key's oldest pending item: route it, take the lease, start the item
        and append its user message (one transaction); None when nothing waits. The asyncio API
        runs the agent after it.

        `routed` is this key's routing decision when the caller has just made it; `cached`: the
        queue as this process last saw it will do (handle_message after its own turn); `rk`: the
        source's routing key, when the caller has it. `stop`: the caller went away; once it is set,
        nothing more is started (the item stays pending for the next run) and a wait for the
        lease is given up (LeaseTimeout)."""
        rk = rk or self.routing.routing_key(source)
        pending = self._pending(rk, routed, cached)
        return self._begin_pending(source, rk, pending, generation, timeout, routed, stop) if pending else None

    def _pending(self, rk: RoutingKey, routed: RouteResult | None, cached: bool) -> list[InboxItem]:
        # Just routed here: this process saved the inbox with the accept, so its cached copy is
        # current unless another writer moved it, which the start's save then refuses (a retry reads afresh).
        inbox = self.inbound.inbox(rk, fresh=routed is None and not cached)
        pending = inbox.pending() if inbox is not None else []
        if pending and pending[0].pinned_session_id is not None:
            pending = self._drop_orphaned_wakeups(rk)
        return pending

    def _begin_pending(self, source: SessionSource, rk: RoutingKey, pending: list[InboxItem], generation: int,
                       timeout: float | None, routed: RouteResult | None,
                       stop: threading.Event | None) -> Turn | None:
        turn = self._turn(rk, stop)
        try:
            begun = self._begin_head(turn, source, rk, pending[0], routed, generation, timeout)
        except BaseException:
            turn.drop()
            raise
        if begun is None:
            turn.drop()
            if pending[0].pinned_session_id is not None and (stop is None or not stop.is_set()):
                # The key moved away from the wake-up's session after it was judged (start_item
                # refused it): judge again; each pass drops at least that item.
                remaining = self._drop_orphaned_wakeups(rk)
                if remaining and remaining[0].item_id != pending[0].item_id:
                    return self.begin_next(source, generation=generation, timeout=timeout, rk=rk, stop=stop)
        return begun

    def _drop_orphaned_wakeups(self, rk: RoutingKey) -> list[InboxItem]:
        """Drop the pinned wake-ups at the head of the queue whose session no longer owns the key
        (decided now, before routing, so that none of them makes or reopens a session); returns
        what then waits."""
        def step() -> list[InboxItem]:
            inbox: Inbox | None = self.inbound.inbox(rk)
            if inbox is None:
                return []
            route = self.ctx.get(rk.route_id)
            now = self.ctx.clock.now()
            pending = inbox.pending()
            while pending and self.delegations.owner_gone(route, pending[0]):
                inbox.drop_item(pending[0].item_id, OWNER_CLOSED, at=now, actor="system:wakeup",
                                cause=f"inbound:{pending[0].item_id}")
                pending = pending[1:]
            if inbox.pending_events:
                self.ctx.save(inbox)
            return pending
        return self.ctx.retrying(step, f"judging the wake-ups of {rk.key}")

    def _begin_head(self, turn: Turn, source: SessionSource, rk: RoutingKey, head: InboxItem,
                    routed: RouteResult | None, generation: int, timeout: float | None) -> Turn | None:
        cause = f"inbound:{head.item_id}"
        if routed is None:
            head_source = SessionSource.from_dict(head.source) if head.source else source
            actor, _ = self.inbound.who(head_source, head.kind)
            with_route = _StartWithRoute(self, turn, rk, source, cause, generation)
            try:
                with self.ctx.recorder.span("routing"):
                    routed = self.routing.get_or_create_session(head_source, actor=actor, cause=cause,
                                                                also=with_route)
            except LeaseHeld:  # nothing was saved: route on its own, then wait for the lease
                with self.ctx.recorder.span("routing"):
                    routed = self.routing.get_or_create_session(head_source, actor=actor, cause=cause)
            except NothingToStart:
                return None
            else:
                assert with_route.starting is not None  # the saved try made it
                return turn.begun(with_route.starting, created_session=routed.created, reason=routed.reason)
        try:
            return turn.begin(routed.session_id, partial(self.start_oldest, rk, source, routed.session_id, turn.stop),
                              cause=cause, generation=generation, timeout=timeout,
                              created_session=routed.created, reason=routed.reason)
        except NothingToStart:
            return None

    def start_oldest(self, rk: RoutingKey, source: SessionSource, session_id: str, stop: threading.Event | None,
                     lease: TurnLease, token: LeaseToken) -> Start:
        """Start the key's oldest pending item under the pending lease, as the inbox is now."""
        if stop is not None and stop.is_set():
            raise NothingToStart  # checked under the lease: no caller will run what this starts
        inbox = self.inbound.inbox(rk, fresh=False)
        waiting = inbox.pending() if inbox is not None else []
        if not waiting:
            raise NothingToStart  # another worker took the last pending item while this one waited
        assert inbox is not None  # it has items waiting
        return self.start_item(lease, token, inbox, waiting[0], source, session_id)

    def start_item(self, lease: TurnLease, token: LeaseToken, inbox: Inbox, item: InboxItem,
                   source: SessionSource, session_id: str) -> Start:
        """Start `item` under the pending lease, whose acquisition reserved the user message's seq:
        the inbox marks it started, the message is built at that seq (after the answers of tool
        calls the last turn left cut off, which move the reservation past them)."""
        if item.pinned_session_id is not None and self.delegations.owner_gone(self.ctx.get(UUID(inbox.route_id)),
                                                                              item):
            raise NothingToStart  # the key moved on since it was judged: begin_next judges it again
        actor, _ = self.inbound.who(item.source or source, item.kind)
        cause = f"inbound:{item.item_id}"
        inbox.start(item.item_id, session_id=session_id, turn_id=token.turn_id, at=self.ctx.clock.now(), actor=actor,
                    cause=cause)
        answers = answers_before_turn(self.leases, lease, token, cause=cause)
        message = self.leases.message_event(token, lease.last_seq, "user", item.text, actor=actor, cause=cause,
                                            platform_message_id=item.message_ids[-1])
        return Start(item, message, inbox, cause, tuple(answers))

    def start_at_once(self, turn: Turn, inbox: Inbox, source: SessionSource, source_dict: dict[str, Any],
                      text: str, kind: str, actor: str, cause: str, session_id: str,
                      new_session: bool) -> Starting | None:
        """When the key is idle (nothing waits or runs on its inbox, the lease free), the message is
        accepted with its turn started, in one inbox event after the lease's acquisition, and its
        words are kept only by the turn's user message (Inbox.accept_started). Otherwise None,
        with nothing recorded: the caller accepts it to wait, and its turn starts after the
        accept commits, as it waits for the lease. Either way the message is durable before the
        agent sees it; the save validates the cached lease and inbox, so another taker makes it
        conflict and the step runs again."""
        if not inbox.idle():
            return None
        item_cause = f"inbound:{inbox.next_item_id()}"

        def start(lease: TurnLease, token: LeaseToken) -> Start:
            answers = answers_before_turn(self.leases, lease, token, cause=item_cause)
            message = self.leases.message_event(token, lease.last_seq, "user", text, actor=actor, cause=item_cause,
                                                platform_message_id=source.message_id)
            item = inbox.accept_started(kind, text, message_id=source.message_id, source=source_dict,
                                        session_id=session_id, turn_id=token.turn_id, seq=lease.last_seq,
                                        at=self.ctx.clock.now(), actor=actor, cause=cause)
            return Start(item, message, inbox, item_cause, tuple(answers))
        try:
            return turn.starting(session_id, start, cause=item_cause, new_session=new_session)
        except LeaseHeld:
            return None

    def _turn(self, rk: RoutingKey, stop: threading.Event | None = None) -> Turn:
        return Turn(self.parts, rk.key, inbox_id(rk.route_id), stop=stop)

    def close(self, wait_s: float) -> None:
        """Wait up to `wait_s` s for the running turns to end, then cancel the rest (TurnlogClosed
        in them), releasing their leases and failing their items while the store is still open."""
        for turn in self.parts.running.close(wait_s):
            turn.close_out()

    # -- the resumed turn of an interrupted session -----------------------------------------

    def resume(self, *, session_id: str, session_key: str, reason: str | None,
               in_flight: tuple[UUID, InboxItem] | None, responder: Responder, sender: Sender,
               timeout: float | None = None) -> TurnOutcome | None:
        """Run the one resumed turn of an interrupted session: a system note instead of empty text.

        None when, by the time the lease is ours, the session no longer waits to be resumed: a turn on
        it completed meanwhile (an inbound message raced the auto-resume, #45456), the sweep delivered
        its reply, or it was suspended or ended. Checked under the lease, so it is never resumed twice.
        """
        last_turn = _last_turn(self.leases, session_id)
        cause = f"resume:{reason or 'interrupted'}"
        turn = Turn(self.parts, session_key, in_flight[0] if in_flight is not None else None)
        start = partial(self._start_resume, session_id, reason, last_turn, cause, in_flight[1] if in_flight else None)
        try:
            turn.begin(session_id, start, cause=cause, timeout=timeout, actor="system:recovery", reason="resumed")
        except NothingToStart:
            turn.drop()
            return None
        except BaseException:
            turn.drop()
            raise
        return turn.respond(responder, sender)

    def _start_resume(self, session_id: str, reason: str | None, last_turn: list[MessageAppended], cause: str,
                      item: InboxItem | None, lease: TurnLease, token: LeaseToken) -> Start:
        session = self.ctx.session(session_id, fresh=True)
        if session is None or not session.resume_pending or session.suspended or session.ended:
            raise NothingToStart
        answers = answers_before_turn(self.leases, lease, token, cause=cause)  # e.g. an imported session's
        note = resume_note(reason, completed_tool_calls(last_turn), cut_off_tool_calls([*last_turn, *answers]))
        message = self.leases.message_event(token, lease.last_seq, "system", note, actor="system:recovery",
                                            cause=cause)
        if item is None:  # nothing of the inbox was in flight: the note is what the turn answers
            item = InboxItem("resume", WAKEUP, (note,), (None,), self.ctx.clock.now(), True, session_id,
                             token.turn_id, None)
        return Start(item, message, None, cause, tuple(answers))


@dataclass
class _Arrival:
    """The accept's part of the routing decision's transaction (built afresh for each try), with
    the turn's start when the key is idle."""

    runner: TurnRunner
    turn: Turn
    rk: RoutingKey
    source: SessionSource
    text: str
    kind: str
    actor: str
    cause: str
    start_at_once: bool
    tries: Tries = field(default_factory=Tries)
    starting: Starting | None = None

    def __call__(self, session_id: str, new_session: bool) -> list[Any]:
        inbound = self.runner.inbound
        first_try = self.tries.first()
        self.starting = None
        judged = inbound.judged(self.rk, self.source, self.text, self.kind, self.actor, self.cause,
                                first_try=first_try)
        if self.start_at_once and not self.turn.stop.is_set():  # a caller gone: the message stays pending
            inbox, source_dict = judged
            self.starting = self.runner.start_at_once(self.turn, inbox, self.source, source_dict, self.text,
                                                      self.kind, self.actor, self.cause, session_id, new_session)
            if self.starting is not None:
                seen = inbound.dedup.first_sighting(self.rk, self.kind, source_dict, self.starting.start.item.item_id,
                                                    self.actor, self.cause)
                return [*self.starting.events(), *seen]
        inbox, _, seen = inbound.accepting(self.rk, self.source, self.text, self.kind, self.actor, self.cause,
                                           first_try=first_try, judged=judged)
        return [inbox, *seen]


@dataclass
class _StartWithRoute:
    """The turn's start in the routing decision's own transaction, when the lease is free."""

    runner: TurnRunner
    turn: Turn
    rk: RoutingKey
    source: SessionSource
    cause: str
    generation: int
    starting: Starting | None = None

    def __call__(self, session_id: str, new_session: bool) -> list[Any]:
        try:
            self.starting = self._starting(session_id, new_session, fresh=False)
        except LeaseHeld:  # as this process last saw it: look at the log before waiting
            self.starting = self._starting(session_id, new_session, fresh=True)
        return self.starting.events()

    def _starting(self, session_id: str, new_session: bool, *, fresh: bool) -> Starting:
        start = partial(self.runner.start_oldest, self.rk, self.source, session_id, self.turn.stop)
        return self.turn.starting(session_id, start, cause=self.cause, generation=self.generation,
                                  new_session=new_session, fresh=fresh)


RESUME_NOTES = {
    "restart_timeout": "a gateway restart",
    "shutdown_timeout": "a gateway shutdown",
}


def resume_note(reason: str | None, completed_tools: Sequence[str] = (), cut_off_tools: Sequence[str] = ()) -> str:
    cause = RESUME_NOTES.get(reason or "", "a gateway interruption")
    done = (f" These tool calls completed before the interruption and their results are above:"
            f" {', '.join(completed_tools)}." if completed_tools else "")
    # Answered only by the interruption: they may have had effects, so the agent checks before redoing them.
    cut = (f" These tool calls were cut off and did not run to completion: {', '.join(cut_off_tools)};"
           " check what they did before running them again." if cut_off_tools else "")
    return (f"[System note: your previous turn was interrupted by {cause}.{done}{cut} Continue the interrupted task; "
            "do not re-run tool calls that already completed. If there is nothing to continue, say briefly "
            "that the session was restored and ask what to do next.]")


def _last_turn(leases: LeaseCommands, session_id: str) -> list[MessageAppended]:
    """The messages of the session's last turn (its newest epoch), oldest first."""
    tail = leases.transcript(session_id, newest_first=True, limit=100)
    return list(reversed([m for m in tail if m.epoch == tail[0].epoch])) if tail else []
