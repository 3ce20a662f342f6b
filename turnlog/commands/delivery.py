"""Delivery-ledger commands: record a reply's obligation, attempt it, settle it (docs/behaviour.md §6.2)."""

from __future__ import annotations

import inspect
import types
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable
from uuid import UUID

from ..domain.delivery import (MAX_ATTEMPTS, Delivery, DeliveryStateError, delivery_id, idempotency_key, may_have_arrived,
                               words_of)
from ..errors import InvalidRequest, NotFound
from .context import CommandContext

# A platform send: send(text), or send(text, idempotency_key=...) for a platform that takes one.
Sender = Callable[..., None]
Also = Callable[[], Iterable[Any]]


@dataclass(frozen=True)
class Attempt:
    delivery_id: UUID
    attempt: int
    text: str  # what to send: the reply, with the recovered-reply prefix on a resend
    idempotency_key: str = field(default="")  # the same for every attempt of this delivery

    def __post_init__(self) -> None:
        if not self.idempotency_key:
            object.__setattr__(self, "idempotency_key", idempotency_key(self.delivery_id))


@dataclass(frozen=True)
class SendFailure:
    error: str
    unknown: bool  # the send may have reached the platform (domain/delivery.py may_have_arrived)


def takes_idempotency_key(send: Callable[..., Any]) -> bool:
    """Whether a send accepts `idempotency_key=`; decided once per function body, so a gateway
    that makes a new closure for every message does not pay for a signature each turn."""
    function = getattr(send, "__func__", send)
    code = getattr(function, "__code__", None)
    if isinstance(function, types.FunctionType) and code is not None and not hasattr(function, "__wrapped__"):
        return _code_takes_key(code)
    return _signature_takes_key(send)


@lru_cache(maxsize=1024)
def _code_takes_key(code: types.CodeType) -> bool:
    if code.co_flags & inspect.CO_VARKEYWORDS:
        return True
    return "idempotency_key" in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


@lru_cache(maxsize=256)
def _signature_takes_key(send: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(send).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "idempotency_key" or p.kind is p.VAR_KEYWORD for p in parameters)


def send_once(send: Callable[..., Any], *args: Any, key: str) -> SendFailure | None:
    """Call a platform send (with the delivery's idempotency key when it takes one); None when it
    returned, else how it failed."""
    try:
        takes_key = takes_idempotency_key(send)
    except TypeError:  # an unhashable callable
        takes_key = False
    try:
        if takes_key:
            send(*args, idempotency_key=key)
        else:
            send(*args)
    except Exception as e:  # noqa: BLE001 - any adapter failure is a failed (or unknown) attempt
        return SendFailure(f"{type(e).__name__}: {e}", may_have_arrived(e))
    return None


class DeliveryCommands:
    def __init__(self, ctx: CommandContext, owner: str) -> None:
        self.ctx = ctx
        self.owner = owner

    def obligation(self, *, session_id: str, seq: int, session_key: str, reply_to: dict[str, Any] | None,
                   content: str, turn_id: str | None, inbound_message_id: str | None, actor: str,
                   cause: str, ident: UUID | None = None, of_message: bool = False,
                   attempting: bool = False) -> Delivery:
        """An unsaved obligation, to be saved in the same transaction as its assistant message
        (`ident`: its id, when it is not the reply at `seq`). `of_message`: `content` is that
        message's, so the event refers to it instead of storing the words again. `attempting`:
        its first attempt, by this owner, is recorded in the same event, for a send right after
        the save."""
        reply_to = reply_to or {}
        attempt = {"attempting_owner": self.owner, "attempt": 1} if attempting else {}
        return Delivery.new(
            Delivery.Created, id=ident or delivery_id(session_id, seq), at=self.ctx.clock.now(), actor=actor, cause=cause,
            session_id=session_id, seq=seq, session_key=session_key, platform=reply_to.get("platform"),
            chat_id=reply_to.get("chat_id"), thread_id=reply_to.get("thread_id"), content=None if of_message else content, turn_id=turn_id,
            inbound_message_id=inbound_message_id, account_id=reply_to.get("account_id"), **attempt,
        )

    def outbound_text(self, delivery: Delivery) -> str:
        """What to send for `delivery`: its words, read from its transcript message when it refers
        to one (domain/delivery.py), with the recovered-reply prefix on a resend."""
        words = words_of(self.ctx.app.events.get, delivery.session_id, delivery.seq, delivery.content)
        if words is None:
            raise NotFound(f"delivery {delivery.id} refers to message #{delivery.seq} of session "
                           f"{delivery.session_id}, which the log does not hold")
        return delivery.outbound_text(words)

    def load(self, ident: UUID, fresh: bool = True) -> Delivery:
        delivery: Delivery | None = self.ctx.get(ident, fresh)
        if delivery is None:
            raise NotFound(f"no delivery {ident}")
        return delivery

    def attempt(self, ident: UUID, *, owner: str | None = None, cause: str = "deliver") -> Attempt:
        def step() -> Attempt:
            delivery = self.load(ident)
            try:
                n = delivery.attempt(owner or self.owner, at=self.ctx.clock.now(), actor=owner or self.owner,
                                     cause=cause, max_attempts=self.ctx.config.delivery_max_attempts)
            except DeliveryStateError as e:
                raise InvalidRequest(str(e)) from None
            self.ctx.save(delivery)
            return Attempt(ident, n, self.outbound_text(delivery))
        return self.ctx.retrying(step, f"attempting delivery {ident}")

    def settle(self, ident: UUID, *, error: str | None = None, unknown: bool = False, also: Also | None = None,
               cause: str = "deliver", fresh: bool = True) -> Delivery:
        """Delivered when error is None, else failed (dead after the last attempt), or unknown when
        the failed send may have reached the platform.

        `also()` builds, afresh for each try, other events to commit in the same transaction.
        """
        def step() -> Delivery:
            extra = list(also()) if also is not None else []
            delivery = self.load(ident, fresh)
            now = self.ctx.clock.now()
            try:
                if error is None:
                    delivery.delivered(at=now, actor=self.owner, cause=cause)
                elif unknown:
                    delivery.outcome_unknown(error, at=now, actor=self.owner, cause=cause)
                else:
                    delivery.failed(error, at=now, actor=self.owner, cause=cause,
                                    max_attempts=self.ctx.config.delivery_max_attempts)
            except DeliveryStateError as e:
                raise InvalidRequest(str(e)) from None
            self.ctx.save(delivery, *extra)
            return delivery
        return self.ctx.retrying(step, f"settling delivery {ident}")

    def settle_send(self, ident: UUID, failure: SendFailure | None, **options: Any) -> Delivery:
        if failure is None:
            return self.settle(ident, **options)
        return self.settle(ident, error=failure.error, unknown=failure.unknown, **options)

    def deliver(self, ident: UUID, send: Sender, *, also: Also | None = None) -> Delivery:
        """Attempt, send, settle. An exception from `send` settles the attempt as failed, or unknown
        when the send may have reached the platform."""
        attempt = self.attempt(ident)
        return self.settle_send(ident, send_once(send, attempt.text, key=attempt.idempotency_key), also=also)

    def change(self, ident: UUID, decide: Callable[[Delivery], None], what: str) -> Delivery:
        """Load, decide (a Delivery method call) and save one delivery; InvalidRequest when its state
        does not allow the change."""
        def step() -> Delivery:
            delivery = self.load(ident)
            try:
                decide(delivery)
            except DeliveryStateError as e:
                raise InvalidRequest(str(e)) from None
            self.ctx.save(delivery)
            return delivery
        return self.ctx.retrying(step, what)

    def retry(self, ident: UUID, *, attempts: int = MAX_ATTEMPTS, actor: str, cause: str) -> Delivery:
        """An operator's retry of a dead, failed or unknown row: `attempts` more, sent by the next sweep."""
        return self.change(ident, lambda d: d.retry(attempts, at=self.ctx.clock.now(), actor=actor, cause=cause),
                           f"retrying delivery {ident}")

    def abandon(self, ident: UUID, reason: str, *, actor: str, cause: str) -> Delivery:
        if not reason.strip():
            raise InvalidRequest("abandoning a delivery needs a reason")

        def decide(d: Delivery) -> None:
            if d.finished:
                raise DeliveryStateError(f"delivery {d.session_id}#{d.seq} is already {d.state}")
            d.abandon(reason, at=self.ctx.clock.now(), actor=actor, cause=cause)
        return self.change(ident, decide, f"abandoning delivery {ident}")
