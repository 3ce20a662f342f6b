"""The delivery an assistant reply owes: one rule for the gateway's turn path (inbound) and for
`Turnlog.record_reply`, the API of a gateway that runs its own loop."""

from __future__ import annotations

from typing import Any

from ..domain.delivery import Delivery
from ..domain.silence import outbound_for_reply
from .delivery import DeliveryCommands
from .lease import LeaseToken


def reply_obligation(deliveries: DeliveryCommands, token: LeaseToken, seq: int, content: str, *,
                     session_key: str, reply_to: dict[str, Any] | None, internal: bool,
                     inbound_message_id: str | None, cause: str, attempting: bool = False) -> Delivery | None:
    """The unsaved obligation to deliver the reply at `seq`, to be saved in the same transaction as the
    message; None when nothing is owed (silence on an internal turn). Without `reply_to` the reply
    goes back to the session's origin. `attempting` also marks it attempting, for a send right after
    the save."""
    outbound = outbound_for_reply(content, internal=internal)
    if outbound is None:
        return None
    if not reply_to:
        session = deliveries.ctx.session(token.session_id)
        reply_to = session.origin if session is not None else None
    owner = deliveries.owner
    delivery = deliveries.obligation(
        session_id=token.session_id, seq=seq, session_key=session_key, reply_to=reply_to, content=outbound,
        turn_id=token.turn_id, inbound_message_id=inbound_message_id, actor=owner, cause=cause)
    if attempting:
        delivery.attempt(owner, at=deliveries.ctx.clock.now(), actor=owner, cause=cause)
    return delivery
