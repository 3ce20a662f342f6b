"""The gateway as it was at any past moment, and what changed between two moments.

A moment is a log position `#N` or an ISO time (the last position at or before it). The routing
map comes from the route history (one indexed query at any depth of log); a session, lease,
inbox or delivery is its aggregate rebuilt at the version it had then (snapshots keep that short);
a transcript is its stream up to that version.
"""

from __future__ import annotations

import re
from typing import Any, Iterable
from uuid import UUID

from eventsourcing.application import Application

from .clock import parse_aware_time
from .commands.agent_history import agent_history_of
from .commands.context import session_aggregate_id
from .commands.lease import lease_id
from .domain.delivery import Delivery
from .domain.history import COMPACTED, HistoryEdit, with_fates
from .domain.key_settings import KEY_SETTINGS_ID, first_change
from .domain.transcript import transcript_id
from .errors import InvalidRequest, NotFound
from .projections.views import Views, message_row


_POSITION = re.compile(r"#[0-9]+")


def parse_moment(views: Views, when: str | int, *, after: bool = False) -> int:
    """A log position from `#N`, an int, or an ISO time: the last position at or before that time,
    or with `after` the first position at or after it (one past the head if there is none)."""
    head = views.head()
    if isinstance(when, bool):
        raise InvalidRequest(f"bad moment {when!r} (give an ISO time with its zone, or a log position #N)")
    if isinstance(when, int):
        position = when
    elif isinstance(when, str) and when.startswith("#"):
        if not _POSITION.fullmatch(when):  # int() would take " 1", "+1", "1_0" and other digits
            raise InvalidRequest(f"bad log position {when!r} (expected #N, N in ASCII digits)")
        position = int(when[1:])
    else:
        try:
            moment = parse_aware_time(str(when))
        except ValueError as e:
            raise InvalidRequest(f"bad moment {when!r}: it {e} (give an ISO time with its zone,"
                                 " or a log position #N)") from None
        found = views.position_at(moment, after=after)
        if after:
            return found if found is not None else head + 1
        position = found or 0
    if position < 0 or position > head:
        raise InvalidRequest(f"log position {position} is outside the log (1..{head})")
    return position


def _project(aggregate: Any, events: Iterable[Any]) -> Any:
    """The library's projector without its per-event runtime Protocol isinstance check (about
    40% of an aggregate load): our events are the library's own domain events."""
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate


class AsOf:
    """The gateway as of log position `position`: read models' rows and aggregates at that version.
    `app` loads aggregates at a version (the repository)."""

    def __init__(self, views: Views, app: Application, position: int) -> None:
        self.views = views
        self.app = app
        self.position = position
        self._loaded: dict[Any, Any] = {}  # aggregates as of this moment (they never change): diff reads each twice

    def version(self, stream: str) -> int | None:
        """The version stream `stream` had reached at this moment (None: it did not exist yet)."""
        return self.views.stream_version(stream, self.position)

    def _aggregate(self, aggregate_id: Any) -> Any | None:
        if aggregate_id not in self._loaded:
            version = self.version(str(aggregate_id))
            self._loaded[aggregate_id] = (None if version is None else
                                          self.app.repository.get(aggregate_id, version=version,
                                                                  projector_func=_project))
        return self._loaded[aggregate_id]

    @property
    def at(self) -> str | None:
        return self.views.time_of(self.position)

    def routes(self, key: str | None = None) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.views.routes_at(self.position, key)]

    def key_settings(self) -> dict[str, Any] | None:
        """The key settings the log recorded as in force then (`turnlog rekey`): old and new, who,
        why and when; None before the first rekey (the gateway's config held)."""
        version = self.version(str(KEY_SETTINGS_ID))
        if version is None:
            return None
        event = first_change(self.app.events.get(KEY_SETTINGS_ID, gt=version - 1, lte=version))
        if event is None:
            return None
        return {"new": event.new, "old": event.old, "actor": event.actor, "cause": event.cause,
                "at": event.timestamp.isoformat(), "version": version}

    def session(self, session_id: str) -> dict[str, Any] | None:
        s = self._aggregate(session_aggregate_id(session_id))
        if s is None:
            return None
        return {"session_id": s.session_id, "session_key": s.session_key, "created_reason": s.created_reason,
                "parent_session_id": s.parent_session_id, "last_activity": s.last_activity.isoformat(),
                "suspended": s.suspended, "suspend_reason": s.suspend_reason, "resume_pending": s.resume_pending,
                "resume_reason": s.resume_reason, "ended": s.ended, "end_reason": s.end_reason,
                "title": s.current_title, "history_edits": [_edit_row(e) for e in s.history_edits]}

    def _session_ids(self, session: str | None, key: str | None) -> list[str]:
        if session:
            return [session]
        return self.views.sessions_created(self.position, key=key)

    def sessions(self, *, session: str | None = None, key: str | None = None) -> list[dict[str, Any]]:
        return [s for sid in self._session_ids(session, key) if (s := self.session(sid)) is not None]

    def lease(self, session_id: str) -> dict[str, Any] | None:
        lease = self._aggregate(lease_id(session_id))
        if lease is None:
            return None
        return {"session_id": session_id, "epoch": lease.epoch, "owner": lease.owner, "owner_key": lease.owner_key,
                "turn_id": lease.turn_id, "expires_at": lease.expires_at.isoformat() if lease.expires_at else None,
                "last_seq": lease.last_seq}

    def leases(self, *, session: str | None = None, key: str | None = None) -> list[dict[str, Any]]:
        return [x for sid in self._session_ids(session, key) if (x := self.lease(sid)) is not None]

    def delivery(self, stream: str) -> dict[str, Any] | None:
        """The delivery whose stream (aggregate id as text) is `stream`, as it was then."""
        d: Delivery | None = self._aggregate(UUID(stream))
        if d is None:
            return None
        return {"session_id": d.session_id, "seq": d.seq, "state": d.state, "attempts": d.attempts,
                "owner": d.owner, "content": self.views.delivery_text(d.session_id, d.seq, d.content)}

    def ledger(self, *, session: str | None = None, key: str | None = None) -> list[dict[str, Any]]:
        return [d for sid in self._session_ids(session, key)
                for stream in self.views.streams_of_kind("DeliveryRecorded", self.position, session_id=sid)
                if (d := self.delivery(stream)) is not None]

    def queue(self, key: str) -> list[dict[str, Any]]:
        out = []
        for stream in self.views.streams_of_kind("InboxOpened", self.position, session_key=key):
            inbox = self._aggregate(UUID(stream))
            for item in inbox.items if inbox is not None else []:
                out.append({"item_id": item["item_id"], "kind": item["kind"],
                            "text": self.views.item_text(item["texts"], item.get("text_at")),
                            "state": "started" if item["started"] else "pending", "session_id": item["session_id"]})
        return out

    def transcript(self, session_id: str) -> list[dict[str, Any]]:
        version = self.version(str(transcript_id(session_id)))
        if version is None:
            return []
        session = self._aggregate(session_aggregate_id(session_id))
        return with_fates(self.views.transcript(session_id, upto_version=version),
                          session.history_edits if session is not None else ())

    def history_edits(self, session_id: str) -> list[dict[str, Any]]:
        """The session's edits of the agent's history (undo, retry, compaction) made by then."""
        s = self._aggregate(session_aggregate_id(session_id))
        return [_edit_row(e) for e in s.history_edits] if s is not None else []

    def agent_history(self, session_id: str) -> list[dict[str, Any]]:
        """What the session's agent was handed as history then (its edits of that moment applied)."""
        s = self._aggregate(session_aggregate_id(session_id))
        version = self.version(str(transcript_id(session_id)))
        if s is None or version is None:
            return []
        return [message_row(m) for m in agent_history_of(self.app.events.get, session_id, s.history_edits,
                                                          upto=version)]

    VIEWS = ("routes", "sessions", "leases", "ledger", "queue", "transcript", "settings")

    def view(self, name: str, *, key: str | None = None, session: str | None = None) -> list[dict[str, Any]]:
        if name == "routes":
            return self.routes(key)
        if name == "settings":
            settings = self.key_settings()
            return [settings] if settings is not None else []
        if name in ("sessions", "leases", "ledger"):
            return getattr(self, name)(session=session, key=key)
        if name == "queue":
            if not key:
                raise InvalidRequest("`at ... queue` needs --key")
            return self.queue(key)
        if name == "transcript":
            if not session:
                if not key:
                    raise InvalidRequest("`at ... transcript` needs --session or --key")
                bound = self.routes(key)
                if not bound or not bound[0]["session_id"]:
                    raise NotFound(f"{key} pointed at no session at #{self.position}")
                session = bound[0]["session_id"]
            return self.transcript(session)
        raise InvalidRequest(f"unknown view {name!r} (known: {', '.join(self.VIEWS)})")


def diff(views: Views, app: Application, a: int, b: int, *, key: str | None = None,
         max_events: int | None = None) -> dict[str, Any]:
    """What changed between positions a and b (a < b), grouped by routing key and by session.
    With `key`, only the key's events are read; more than `max_events` of them to read raises
    TooLarge before any work is done."""
    if a > b:
        a, b = b, a
    before, after = AsOf(views, app, a), AsOf(views, app, b)
    # typed rows, not dicts: every route is read on both sides, and only a few differ
    routes_a = {r.route_id: r for r in views.routes_at(a, key)}
    routes_b = {r.route_id: r for r in views.routes_at(b, key)}
    by_key: dict[str, list[dict[str, Any]]] = {}
    for route_id in sorted(set(routes_a) | set(routes_b)):
        ra, rb = routes_a.get(route_id), routes_b.get(route_id)
        old = ra.session_id if ra else None
        new = rb.session_id if rb else None
        if ra is None or old != new:
            either = rb or ra
            name = either.session_key if either is not None else route_id
            by_key.setdefault(name, []).append({"change": "registered" if ra is None else "rebound",
                                                "from_session": old, "to_session": new,
                                                "reason": rb.bound_reason if rb else None})
    touched = sorted(views.sessions_touched(a, b, key=key, max_events=max_events))
    events = views.events_between(a, b)
    # Only what has an event between a and b can differ: a stream at the same version on both
    # sides is the same aggregate, so only changed streams are loaded (twice, at a and at b).
    deliveries_changed = views.delivery_streams_changed(a, b, sessions=touched if key is not None else None)
    by_session: dict[str, dict[str, Any]] = {}
    for sid in touched:
        change: dict[str, Any] = {}
        fields = _stream_changes(before, after, session_aggregate_id(sid), before.session, after.session, sid,
                                 skip={"last_activity"})
        edits = fields.pop("history_edits", None)
        if edits:  # edits only ever add to the list: name the ones made between a and b
            change["history_edits"] = edits["to"][len(edits["from"]):]
        if fields:
            change["session"] = fields
        lease = _stream_changes(before, after, lease_id(sid), before.lease, after.lease, sid,
                                skip={"expires_at", "last_seq"})
        if lease:
            change["lease"] = lease
        stream = str(transcript_id(sid))
        messages = (after.version(stream) or 0) - (before.version(stream) or 0)  # one message per version
        if messages:
            change["messages_added"] = messages
        deliveries = {}
        for stream in deliveries_changed.get(sid, []):
            then, now = before.delivery(stream), after.delivery(stream)
            if now is not None and (then is None or then["state"] != now["state"]):
                deliveries[now["seq"]] = {"from": then["state"] if then else None, "to": now["state"]}
        if deliveries:
            change["deliveries"] = deliveries
        if change:
            by_session[sid] = change
    return {"from": a, "to": b, "events": events, "keys": by_key, "sessions": by_session}


def _edit_row(edit: HistoryEdit) -> dict[str, Any]:
    row = {"edit": edit.kind, "from_seq": edit.from_seq, "upto_seq": edit.upto_seq}
    return {**row, "focus": edit.focus, "model": edit.model} if edit.kind == COMPACTED else row


def _stream_changes(before: AsOf, after: AsOf, aggregate_id: Any, read_a: Any, read_b: Any, sid: str, *,
                    skip: set[str]) -> dict[str, Any]:
    """_field_changes of one aggregate's view, loaded only when its stream moved between a and b."""
    if before.version(str(aggregate_id)) == after.version(str(aggregate_id)):
        return {}
    return _field_changes(read_a(sid), read_b(sid), skip=skip)


def _field_changes(old: dict[str, Any] | None, new: dict[str, Any] | None, *,
                   skip: set[str]) -> dict[str, Any]:
    if old == new:
        return {}
    if old is None or new is None:
        return {"from": old, "to": new}
    return {k: {"from": old.get(k), "to": v} for k, v in new.items() if k not in skip and old.get(k) != v}

