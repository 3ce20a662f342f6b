"""What became of each message accepted on a routing key, read from its inbox's own events: the
queue read model keeps only the items still waiting or running."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from eventsourcing.application import Application

from ..domain.inbox import Inbox, inbox_id
from ..projections.base import TypedRow


@dataclass(frozen=True)
class MessageFate(TypedRow):
    """A message (by its platform `message_id`) and the inbox item it went into (`item_id`, the
    item it was merged into if it was): that item's `state` (pending, started, completed or
    dropped) and its `outcome` (how it completed, or why it was dropped; None before either)."""
    message_id: str
    item_id: str
    state: str
    outcome: str | None


def message_fates(app: Application, route_id: UUID | str) -> list[MessageFate]:
    """Every message with an id accepted on the route, in the order they were first accepted."""
    item_of: dict[str, str] = {}
    fate: dict[str, tuple[str, str | None]] = {}
    for event in app.events.get(inbox_id(route_id)):
        if isinstance(event, Inbox.Accepted):
            item = event.merged_into or event.item_id
            if event.message_id is not None:
                item_of[event.message_id] = item
            fate.setdefault(item, ("started", None) if event.turn_id is not None else ("pending", None))
        elif isinstance(event, Inbox.Started):
            fate[event.item_id] = ("started", None)
        elif isinstance(event, Inbox.Completed):
            fate[event.item_id] = ("completed", event.outcome)
        elif isinstance(event, Inbox.Dropped):
            fate.update({item: ("dropped", event.reason) for item in event.item_ids})
    return [MessageFate(message_id, item, *fate[item]) for message_id, item in item_of.items() if item in fate]
