"""Delivery-ledger commands: record a reply's obligation, attempt it, settle it (docs/behaviour.md §6.2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable
from uuid import UUID

from ..domain.delivery import Delivery, DeliveryStateError, delivery_id
from ..errors import InvalidRequest, NotFound
from .context import CommandContext

Sender = Callable[[str], None]
Also = Callable[[], Iterable[Any]]


@dataclass(frozen=True)
class Attempt:
    delivery_id: UUID
    attempt: int
    text: str  # what to send: the reply, with the recovered-reply prefix on a resend


class DeliveryCommands:
    def __init__(self, ctx: CommandContext, owner: str) -> None:
        self.ctx = ctx
        self.owner = owner

    def obligation(self, *, session_id: str, seq: int, session_key: str, reply_to: dict[str, Any] | None,
                   content: str, turn_id: str | None, inbound_message_id: str | None, actor: str,
                   cause: str) -> Delivery:
        """An unsaved obligation, to be saved in the same transaction as its assistant message."""
        reply_to = reply_to or {}
        return Delivery.new(
            Delivery.Created, id=delivery_id(session_id, seq), at=self.ctx.clock.now(), actor=actor, cause=cause,
            session_id=session_id, seq=seq, session_key=session_key, platform=reply_to.get("platform"),
            chat_id=reply_to.get("chat_id"), thread_id=reply_to.get("thread_id"), content=content, turn_id=turn_id,
            inbound_message_id=inbound_message_id, account_id=reply_to.get("account_id"),
        )

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
                                     cause=cause)
            except DeliveryStateError as e:
                raise InvalidRequest(str(e)) from None
            self.ctx.save(delivery)
            return Attempt(ident, n, delivery.outbound_text)
        return self.ctx.retrying(step, f"attempting delivery {ident}")

    def settle(self, ident: UUID, *, error: str | None = None, also: Also | None = None,
               cause: str = "deliver", fresh: bool = True) -> Delivery:
        """Delivered when error is None, else failed (abandoned after the last attempt).

        `also()` builds, afresh for each try, other events to commit in the same transaction.
        """
        def step() -> Delivery:
            extra = list(also()) if also is not None else []
            delivery = self.load(ident, fresh)
            now = self.ctx.clock.now()
            try:
                if error is None:
                    delivery.delivered(at=now, actor=self.owner, cause=cause)
                else:
                    delivery.failed(error, at=now, actor=self.owner, cause=cause)
            except DeliveryStateError as e:
                raise InvalidRequest(str(e)) from None
            self.ctx.save(delivery, *extra)
            return delivery
        return self.ctx.retrying(step, f"settling delivery {ident}")

    def deliver(self, ident: UUID, send: Sender, *, also: Also | None = None) -> Delivery:
        """Attempt, send, settle. An exception from `send` settles the attempt as failed."""
        attempt = self.attempt(ident)
        try:
            send(attempt.text)
        except Exception as e:  # noqa: BLE001 - any adapter failure is a failed attempt
            return self.settle(ident, error=f"{type(e).__name__}: {e}", also=also)
        return self.settle(ident, also=also)
