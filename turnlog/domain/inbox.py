"""Inbox: the durable inbound queue of one routing key (docs/behaviour.md §8).

A message is accepted as an event before any processing, so a crash never loses it. Pending
items are served strictly in order, one turn per item. The head item is the "pending slot";
the rest is the overflow FIFO. A burst of human messages merges into the human item at the tail
(so a user who types three lines gets one turn), wake-ups merge the same way, and a `/queue`
item is never merged: each `/queue` yields exactly one turn.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Callable, Iterable, Sequence, TYPE_CHECKING
from uuid import UUID

from .base import TurnlogAggregate, stream_id
from .dedup import BY_SAME_TEXT, DuplicateInbound, content_key, remember, repeats_within, seen_time, sender_of
from .transcript import message_at

HUMAN = "human"
QUEUED = "queued"
WAKEUP = "wakeup"
KINDS = (HUMAN, QUEUED, WAKEUP)
BUSY_CAP = 32
MERGES_INTO_TAIL = {HUMAN, WAKEUP}


def inbox_id(route_id: UUID | str) -> UUID:
    return stream_id("inbox", str(route_id))


@dataclass(frozen=True)
class InboxItem:
    """A read-only view of one queued item (the aggregate keeps plain dicts so snapshots encode)."""

    item_id: str
    kind: str
    texts: tuple[str, ...]
    message_ids: tuple[str | None, ...]
    accepted_at: datetime
    started: bool
    session_id: str | None
    turn_id: str | None
    source: dict[str, Any] | None  # the latest source: the one a reply goes back to
    # Replies given before (replayed traffic), one per text: whoever runs the item records them.
    replies: tuple[str | None, ...] = ()
    last_at: datetime | None = None  # when its latest text arrived (text batching waits from then)
    # A wake-up for one session (a delegation's finish): run only while that session owns the key.
    pinned_session_id: str | None = None
    # (session_id, seq) of the transcript message holding the item's words, when its event kept
    # none (accepted and started at once): `texts` is then empty until item_with_text reads them.
    text_at: tuple[str, int] | None = None

    @property
    def text(self) -> str:
        return "\n".join(self.texts)

    @property
    def recorded_reply(self) -> str | None:
        """The replies recorded with the item's messages, in order, or None when there are none."""
        given = [r for r in self.replies if r is not None]
        return "\n".join(given) if given else None

    @classmethod
    def of(cls, raw: dict[str, Any]) -> "InboxItem":
        replies = raw.get("replies") or {}
        return cls(raw["item_id"], raw["kind"], tuple(raw["texts"]), tuple(raw["message_ids"]), raw["accepted_at"],
                   raw["started"], raw["session_id"], raw["turn_id"], raw["source"],
                   tuple(replies.get(str(i)) for i in range(len(raw["texts"]))), raw.get("last_at"),
                   raw.get("pinned_session_id"), tuple(raw["text_at"]) if raw.get("text_at") else None)


def texts_of(get: Callable[..., Iterable[Any]], texts: Sequence[str],
             text_at: Sequence[Any] | None) -> tuple[str, ...]:
    """An item's words: its own `texts`, else (accepted and started at once) those of the
    transcript message at `text_at`, (session_id, seq), read through `get` (read_transcript's);
    ("",) when the log holds no such message."""
    if texts or text_at is None:
        return tuple(texts)
    message = message_at(get, str(text_at[0]), int(text_at[1]))
    return (message.content if message is not None else "",)


def item_with_text(get: Callable[..., Iterable[Any]], item: InboxItem) -> InboxItem:
    """The item with its words (texts_of), for whoever hands it on: a resumed turn's responder."""
    return item if item.texts else replace(item, texts=texts_of(get, item.texts, item.text_at))


class InboxFull(Exception):
    pass


class Inbox(TurnlogAggregate):
    TOPIC = "turnlog:Inbox"

    if TYPE_CHECKING:  # state set by the events' apply methods
        route_id: str
        session_key: str
        items: list[dict[str, Any]]
        accepted: int
        seen: dict[str, float]

    class Created(TurnlogAggregate.Created):
        TOPIC = "turnlog:InboxOpened"
        route_id: str
        session_key: str

        def apply(self, inbox: "Inbox") -> None:
            inbox.route_id = self.route_id
            inbox.session_key = self.session_key
            inbox.items = []
            inbox.accepted = 0
            inbox.seen = {}  # content key -> first sighting, POSIX time (dedup.py)

    class Accepted(TurnlogAggregate.Event):
        """Version 2: a message accepted on an idle key and its turn started in the same
        transaction is one event, carrying the start (`session_id`, `turn_id`, as Started). Its
        words are then kept only by the turn's user message at (`session_id`, `seq`), saved in
        that transaction: `text` is None, and `content_key` is what same-text dedup remembers of
        it (dedup.content_key; None without a sender). A message that waits keeps its `text`."""

        TOPIC = "turnlog:InboundAccepted"
        class_version = 2
        item_id: str
        kind: str
        text: str | None
        message_id: str | None
        source: dict[str, Any] | None
        merged_into: str | None
        session_id: str | None
        turn_id: str | None
        seq: int | None
        content_key: str | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state.update(session_id=None, turn_id=None, seq=None, content_key=None)  # accepted, not started

        def apply(self, inbox: "Inbox") -> None:
            inbox.accepted = inbox.accepted + 1
            sender = sender_of(self.source) if self.kind == HUMAN else None
            key = (content_key(sender, self.text) if self.text is not None else self.content_key) \
                if sender is not None else None
            if key is not None:
                # Only accepted messages are remembered: a repeat inside the window was refused,
                # so an accepted one is a first sighting (Hermes: TTL from first sighting).
                inbox.seen = remember(getattr(inbox, "seen", {}), key, self.timestamp)
            if self.turn_id is not None:
                inbox.items = [*inbox.items, {
                    "item_id": self.item_id, "kind": self.kind, "texts": [], "message_ids": [self.message_id],
                    "accepted_at": self.timestamp, "started": True, "session_id": self.session_id,
                    "turn_id": self.turn_id, "source": self.source, "text_at": [self.session_id, self.seq]}]
                return
            if self.merged_into is not None:
                item = inbox._raw(self.merged_into)
                inbox._replace({**item, "texts": [*item["texts"], self.text],
                                "message_ids": [*item["message_ids"], self.message_id],
                                "source": self.source or item["source"], "last_at": self.timestamp})
                return
            inbox.items = [*inbox.items, {
                "item_id": self.item_id, "kind": self.kind, "texts": [self.text], "message_ids": [self.message_id],
                "accepted_at": self.timestamp, "started": False, "session_id": None, "turn_id": None,
                "source": self.source}]

    class Rejected(TurnlogAggregate.Event):
        TOPIC = "turnlog:InboundRejected"
        kind: str
        text: str
        message_id: str | None
        reason: str

        def apply(self, inbox: "Inbox") -> None:
            pass

    class ReplyAttached(TurnlogAggregate.Event):
        """A reply given before (a replayed message's): it travels with the item to whichever turn runs it."""

        TOPIC = "turnlog:InboundReplyAttached"
        item_id: str
        reply: str

        def apply(self, inbox: "Inbox") -> None:
            item = inbox._raw(self.item_id)
            index = str(len(item["texts"]) - 1)  # the text accepted just before, in the same transaction
            inbox._replace({**item, "replies": {**(item.get("replies") or {}), index: self.reply}})

    class WakeupPinned(TurnlogAggregate.Event):
        """The wake-up accepted just before, in the same transaction, is for this session only."""

        TOPIC = "turnlog:InboundWakeupPinned"
        item_id: str
        session_id: str
        delegation: str  # the handle whose finish it reports

        def apply(self, inbox: "Inbox") -> None:
            inbox._replace({**inbox._raw(self.item_id), "pinned_session_id": self.session_id})

    class DuplicateRefused(TurnlogAggregate.Event):
        """A message that repeats one already accepted: recorded, never run."""

        TOPIC = "turnlog:InboundDuplicateRefused"
        kind: str
        message_id: str | None
        reason: str  # message_id | same_text
        duplicate_of: str | None  # the item the first sighting went into, when known
        first_seen_at: datetime | None

        def apply(self, inbox: "Inbox") -> None:
            pass

    class Started(TurnlogAggregate.Event):
        TOPIC = "turnlog:InboundStarted"
        item_id: str
        session_id: str
        turn_id: str

        def apply(self, inbox: "Inbox") -> None:
            item = inbox._raw(self.item_id)
            inbox._replace({**item, "started": True, "session_id": self.session_id, "turn_id": self.turn_id})

    class Completed(TurnlogAggregate.Event):
        TOPIC = "turnlog:InboundCompleted"
        item_id: str
        outcome: str

        def apply(self, inbox: "Inbox") -> None:
            inbox.items = [i for i in inbox.items if i["item_id"] != self.item_id]

    class Dropped(TurnlogAggregate.Event):
        TOPIC = "turnlog:InboundDropped"
        item_ids: list[str]
        reason: str

        def apply(self, inbox: "Inbox") -> None:
            dropped = set(self.item_ids)
            inbox.items = [i for i in inbox.items if i["item_id"] not in dropped]

    def _raw(self, item_id: str) -> dict[str, Any]:
        for item in self.items:
            if item["item_id"] == item_id:
                return item
        raise KeyError(f"no inbox item {item_id!r}")

    def _replace(self, item: dict[str, Any]) -> None:
        self.items = [item if i["item_id"] == item["item_id"] else i for i in self.items]

    def item(self, item_id: str) -> InboxItem:
        return InboxItem.of(self._raw(item_id))

    def pending(self) -> list[InboxItem]:
        return [InboxItem.of(i) for i in self.items if not i["started"]]

    def in_flight(self) -> list[InboxItem]:
        return [InboxItem.of(i) for i in self.items if i["started"]]

    @property
    def depth(self) -> int:
        return len(self.pending())

    def first_seen(self, source: dict[str, Any] | None, text: str) -> float | None:
        """When (POSIX time) this sender's same text was first accepted here (None if not remembered)."""
        sender = sender_of(source)
        return getattr(self, "seen", {}).get(content_key(sender, text)) if sender is not None else None

    def check_repeat(self, kind: str, text: str, *, source: dict[str, Any] | None, at: datetime,
                     window_s: float) -> None:
        """Raises DuplicateInbound when a human text repeats this sender's within the window."""
        if kind != HUMAN:
            return
        first = self.first_seen(source, text)
        if repeats_within(first, at, window_s):
            raise DuplicateInbound(BY_SAME_TEXT, (source or {}).get("message_id"), None, seen_time(first))

    def refuse_duplicate(self, kind: str, duplicate: DuplicateInbound, *, at: datetime, actor: str,
                         cause: str) -> None:
        self.record(Inbox.DuplicateRefused, at=at, actor=actor, cause=cause, kind=kind,
                    message_id=duplicate.message_id, reason=duplicate.reason, duplicate_of=duplicate.duplicate_of,
                    first_seen_at=duplicate.first_seen_at)

    def accept(self, kind: str, text: str, *, message_id: str | None, source: dict[str, Any] | None,
               at: datetime, actor: str, cause: str, reply: str | None = None,
               pinned: tuple[str, str] | None = None) -> str:
        """Returns the id of the item the message went into (a new one, or the tail it merged into).

        `reply` is a reply already given to this message (replayed traffic); see ReplyAttached.
        `pinned`: (session id, delegation handle) of a wake-up for that session only (WakeupPinned);
        it merges only into a wake-up pinned to the same session.
        """
        if kind not in KINDS:
            raise ValueError(f"unknown inbound kind {kind!r}")
        if pinned is not None and kind != WAKEUP:
            raise ValueError("only a wake-up is pinned to a session")
        pending = self.pending()
        tail = pending[-1] if pending else None
        pin = pinned[0] if pinned is not None else None
        merged_into = (tail.item_id if tail is not None and kind in MERGES_INTO_TAIL and tail.kind == kind
                       and tail.pinned_session_id == pin else None)
        # A delegation's result is never refused for a busy queue: each delegation finishes once,
        # so these cannot flood it, and a refusal would orphan the result.
        if merged_into is None and len(pending) >= BUSY_CAP and pinned is None:
            self.record(Inbox.Rejected, at=at, actor=actor, cause=cause, kind=kind, text=text,
                        message_id=message_id, reason="busy_cap")
            raise InboxFull(f"{BUSY_CAP} items are already waiting for {self.session_key}")
        item_id = merged_into or self.next_item_id()
        self.record(Inbox.Accepted, at=at, actor=actor, cause=cause, item_id=item_id, kind=kind, text=text,
                    message_id=message_id, source=source, merged_into=merged_into, session_id=None, turn_id=None,
                    seq=None, content_key=None)
        if reply is not None:
            self.record(Inbox.ReplyAttached, at=at, actor=actor, cause=cause, item_id=item_id, reply=reply)
        if pinned is not None and merged_into is None:
            self.record(Inbox.WakeupPinned, at=at, actor=actor, cause=cause, item_id=item_id, session_id=pinned[0],
                        delegation=pinned[1])
        return item_id

    def next_item_id(self) -> str:
        """The id the next accepted message gets when it merges into no waiting item."""
        return f"{self.accepted + 1}"

    def idle(self) -> bool:
        """Nothing waits and nothing runs: a message accepted now may start its turn at once."""
        return not self.items

    def accept_started(self, kind: str, text: str, *, message_id: str | None, source: dict[str, Any] | None,
                       session_id: str, turn_id: str, seq: int, at: datetime, actor: str, cause: str) -> InboxItem:
        """Accept a message on an idle inbox with its turn started (one Accepted event, version 2)
        and return the item with its words: the turn's user message at (session_id, seq), saved
        in the same transaction, keeps them."""
        if kind not in KINDS:
            raise ValueError(f"unknown inbound kind {kind!r}")
        if not self.idle():
            raise ValueError(f"inbox of {self.session_key} is not idle: its message waits for its turn")
        sender = sender_of(source) if kind == HUMAN else None
        item_id = self.next_item_id()
        self.record(Inbox.Accepted, at=at, actor=actor, cause=cause, item_id=item_id, kind=kind, text=None,
                    message_id=message_id, source=source, merged_into=None, session_id=session_id,
                    turn_id=turn_id, seq=seq, content_key=content_key(sender, text) if sender is not None else None)
        return replace(self.item(item_id), texts=(text,))

    def start(self, item_id: str, *, session_id: str, turn_id: str, at: datetime, actor: str, cause: str) -> None:
        item = self.item(item_id)
        if item.started:
            raise ValueError(f"inbox item {item_id} already started in turn {item.turn_id}")
        self.record(Inbox.Started, at=at, actor=actor, cause=cause, item_id=item_id, session_id=session_id,
                    turn_id=turn_id)

    def complete(self, item_id: str, outcome: str, *, at: datetime, actor: str, cause: str) -> None:
        if any(i["item_id"] == item_id for i in self.items):
            self.record(Inbox.Completed, at=at, actor=actor, cause=cause, item_id=item_id, outcome=outcome)

    def abort_in_flight(self, outcome: str, *, at: datetime, actor: str, cause: str) -> list[str]:
        """Complete every started item with `outcome`: its turn was cut off and will not finish."""
        ids = [i.item_id for i in self.in_flight()]
        for item_id in ids:
            self.record(Inbox.Completed, at=at, actor=actor, cause=cause, item_id=item_id, outcome=outcome)
        return ids

    def drop_item(self, item_id: str, reason: str, *, at: datetime, actor: str, cause: str) -> None:
        """Drop one waiting item unrun (a wake-up whose session no longer owns the key)."""
        if any(i.item_id == item_id for i in self.pending()):
            self.record(Inbox.Dropped, at=at, actor=actor, cause=cause, item_ids=[item_id], reason=reason)

    def drop(self, kinds: set[str], reason: str, *, at: datetime, actor: str, cause: str) -> list[str]:
        ids = [i.item_id for i in self.pending() if i.kind in kinds]
        if ids:
            self.record(Inbox.Dropped, at=at, actor=actor, cause=cause, item_ids=ids, reason=reason)
        return ids
