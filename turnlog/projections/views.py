"""The read side: every query of the read models, as typed rows, in one object.

`Views` composes the per-projection readers (routing_views, ledger_views, queue_views,
leases_views, route_history_views, timeline_query, search_query) over one runner's connection,
each read under the runner's lock.
Reads never write: nothing here catches the read models up or seals the hash chain. Who does:
- a writable `Turnlog`'s read methods call `Turnlog.maintenance.catch_up()` first (read-your-writes);
  the engine's own commands (recovery at a boot, the sweep, titles) call `refresh`, given by the
  facade, which catches up only the read models they read (COMMAND_READ_MODELS): a new node's
  boot does not wait for its full-text index and timeline to fill;
- a read-only `Turnlog` never does: its views read as of the read models' positions.
Transcripts are read from the search projection's table and, past its position, from the log
(always current, at any version; search_views.py).
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from typing import Any, Callable, Iterable, Sequence
from uuid import UUID

from eventsourcing.application import Application

from ..domain.delivery import words_of
from ..domain.inbox import texts_of
from ..domain.history import HistoryEdit, with_fates
from ..domain.session import edits_in, session_stream
from ..domain.transcript import MessageAppended, read_transcript, transcript_id
from . import (counts_views, delegations_views, ledger_views, leases_views, queue_views, route_history_views, routing_views, search_query,
               search_views, timeline_query)
from .delegations_views import DelegationRow
from .route_history_views import BoundRoute
from .routing_views import RouteRow, SessionFlagRow, SessionRow
from .runner import ProjectionRunner
from .ledger_views import DeliveryRow, OwedDelivery
from .leases_views import LeaseRow
from .queue_views import ItemRef, QueueDepth, QueueItemRow
from .search_hit import SearchHit


# What the commands read through Views; the rest (search, timeline, route history, counts) only
# the facade's reads, which catch everything up first.
COMMAND_READ_MODELS = ("routes", "sessions", "queue", "ledger", "leases", "delegations")


def message_row(e: Any) -> dict[str, Any]:
    """A transcript message (a MessageAppended event) as the API shows it."""
    return {"seq": e.originator_version, "role": e.role, "content": e.content, "tool_calls": e.tool_calls,
            "tool_call_id": e.tool_call_id, "name": e.name, "token_count": e.token_count,
            "finish_reason": e.finish_reason, "platform_message_id": e.platform_message_id,
            "timestamp": e.timestamp.isoformat(), "epoch": e.epoch, "turn_id": e.turn_id, "actor": e.actor,
            "cause": e.cause}


class Views:
    def __init__(self, runner: ProjectionRunner, app: Application,
                 refresh: Callable[[], int] | None = None) -> None:
        self.runner = runner
        self.app = app
        self._refresh = refresh
        self._stored_transcripts: bool | None = None  # the search tables hold them (search_views)

    def refresh(self) -> int:
        """Catch the read models up, when the owner of these views allows it (see the module doc)."""
        return self._refresh() if self._refresh is not None else 0

    def _read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        # One read-model connection serves every thread of a Turnlog: one user at a time.
        with self.runner.lock:
            return fn(self.runner.db, *args, **kwargs)

    # -- routes and sessions (routing.py) ---------------------------------------------------

    def routes(self) -> list[RouteRow]:
        return self._read(routing_views.routes)

    def sessions(self, title: str | None = None) -> list[SessionRow]:
        return self._read(routing_views.sessions, title)

    def sessions_of(self, session_ids: Iterable[str], platform: str | None, user: str | None) -> list[SessionRow]:
        return self._read(routing_views.sessions_of, session_ids, platform, user)

    def titled(self) -> list[tuple[str, str]]:
        return self._read(routing_views.titled)

    def title_holder(self, title: str) -> str | None:
        return self._read(routing_views.title_holder, title)

    def session(self, session_id: str) -> SessionRow | None:
        return self._read(routing_views.session, session_id)

    def session_exists(self, session_id: str) -> bool:
        return self._read(routing_views.session_exists, session_id)

    def route_ids_of_key(self, key: str) -> list[str]:
        return self._read(routing_views.route_ids_of_key, key)

    def current_session(self, route_id: str) -> str | None:
        return self._read(routing_views.current_session, route_id)

    def compression_child(self, session_id: str) -> str | None:
        return self._read(routing_views.compression_child, session_id)

    def resume_pending(self) -> list[SessionFlagRow]:
        return self._read(routing_views.resume_pending)

    def resume_pending_any(self) -> list[SessionFlagRow]:
        return self._read(routing_views.resume_pending_any)

    def suspended(self) -> list[SessionFlagRow]:
        return self._read(routing_views.suspended)

    # -- deliveries, inbound queue, leases (ledger.py, queue.py, leases.py) ------------------

    def queue(self, route_ids: list[str]) -> list[QueueItemRow]:
        """The items with their words (an item's own, or its transcript message's: texts_of)."""
        return [row if seq is None else replace(row, text=self.item_text((), (row.session_id, seq)))
                for row, seq in self._read(queue_views.queue, route_ids)]

    def item_text(self, texts: Sequence[str], text_at: Sequence[Any] | None) -> str:
        """An inbox item's words given its own `texts` and where its transcript message is
        (domain/inbox.py texts_of)."""
        return "\n".join(texts_of(self.app.events.get, texts, text_at))

    def queue_depths(self) -> list[QueueDepth]:
        return self._read(queue_views.queue_depths)

    def ledger(self, status: str | None = None, limit: int | None = None,
               ids: tuple[str, ...] | None = None) -> list[tuple[DeliveryRow, str]]:
        """Each delivery (of `ids`, when given) with its content (read from the log at the row's
        recorded position, or from the transcript message the delivery refers to); at most
        `limit`, and only their contents are read, in one read: a row that knows its transcript
        message's position (`words_position`, set only where the delivery carries no words of its
        own) reads that message alone; a row without one its recorded event (and, when that refers
        to a message, the message by its own stream)."""
        with self.runner.lock:
            rows = ledger_views.ledger(self.runner.db, status, limit, ids)
            read = self.runner.log.fields_at([r.recorded_position if r.words_position is None else r.words_position
                                              for r in rows])
        return [(r, self.delivery_text(r.session_id, r.seq, read[r.recorded_position]["content"])
                 if r.words_position is None else self.delivery_text(r.session_id, r.seq, None,
                                                                      read.get(r.words_position)))
                for r in rows]

    def delivery_text(self, session_id: str, seq: int, content: str | None,
                      message: dict[str, Any] | None = None) -> str:
        """A delivery's words given its event's `content` (domain/delivery.py words_of), or the
        fields of its transcript message when they were read already (`message`)."""
        return words_of(self.app.events.get, session_id, seq, content, message) or ""

    def owed_deliveries(self) -> list[OwedDelivery]:
        return self._read(ledger_views.owed)

    def dead_deliveries(self) -> list[OwedDelivery]:
        return self._read(ledger_views.owed, ("dead",))

    def delivery_state_counts(self) -> dict[str, int]:
        return self._read(ledger_views.state_counts)

    def event_counts(self) -> dict[tuple[str, str], int] | None:
        return self._read(counts_views.event_counts)

    def held_leases(self) -> list[LeaseRow]:
        return self._read(leases_views.held_leases)

    def sessions_held_by(self, owners: Iterable[str]) -> list[str]:
        return self._read(leases_views.sessions_held_by, owners)

    def item_of_turn(self, turn_id: str) -> ItemRef | None:
        return self._read(queue_views.item_of_turn, turn_id)

    def started_item(self, session_id: str) -> ItemRef | None:
        return self._read(queue_views.started_item, session_id)

    def inboxes_with_pending(self) -> list[str]:
        return self._read(queue_views.inboxes_with_pending)

    def delegations(self, session_id: str | None = None, state: str | None = None) -> list[DelegationRow]:
        with self.runner.lock:
            if "delegations" not in self.runner.table_names():
                return []  # read-only on a read-model file made before this projection: nothing as of it
            return delegations_views.delegations(self.runner.db, session_id, state)

    # -- the log's timeline and the routing map at a moment --------------------------------

    def head(self) -> int:
        return self.runner.head()

    def routes_at(self, position: int, key: str | None = None) -> list[BoundRoute]:
        return self._read(route_history_views.routes_at, position, key)

    def sessions_created(self, upto: int, *, key: str | None = None) -> list[str]:
        return self._read(timeline_query.sessions_created, upto, key=key)

    def all_streams_of_kind(self, kind: str) -> list[str]:
        return self._read(timeline_query.all_streams_of_kind, kind)

    def streams_of_kind(self, kind: str, upto: int, *, session_id: str | None = None,
                        session_key: str | None = None) -> list[str]:
        return self._read(timeline_query.streams_of_kind, kind, upto, session_id=session_id,
                          session_key=session_key)

    def session_streams(self, session_ids: Iterable[str], *, leave_out: Iterable[str] = ()) -> dict[str, list[str]]:
        return self._read(timeline_query.session_streams, list(session_ids), leave_out=leave_out)

    def stream_rows(self, streams: Iterable[str]) -> list[Any]:
        """The log's rows of these streams (position, stored id, version, topic, stored bytes), in order."""
        with self.runner.lock:
            return self.runner.log.stream_rows(streams, self.runner.head())

    def history(self, **query: Any) -> list[dict[str, Any]]:
        with self.runner.lock:
            return timeline_query.history(self.runner, **query)

    def position_at(self, moment: Any, *, after: bool = False) -> int | None:
        with self.runner.lock:
            return timeline_query.position_at(self.runner, moment, after=after)

    def time_of(self, position: int) -> str | None:
        with self.runner.lock:
            return timeline_query.time_of(self.runner, position)

    def sessions_touched(self, after: int, upto: int, *, key: str | None = None,
                         max_events: int | None = None) -> set[str]:
        with self.runner.lock:
            return timeline_query.sessions_touched(self.runner, after, upto, key=key, max_events=max_events)

    def delivery_streams_changed(self, after: int, upto: int, *,
                                 sessions: Iterable[str] | None = None) -> dict[str, list[str]]:
        """Only these sessions' delivery streams, if given (read through their streams)."""
        with self.runner.lock:
            if sessions is not None:
                return timeline_query.delivery_streams_of(self.runner, sessions, after, upto)
            return timeline_query.delivery_streams_changed(self.runner, after, upto)

    def events_between(self, after: int, upto: int) -> int:
        with self.runner.lock:
            return self.runner.log.count(after, upto)

    def stream_version(self, stream: str, upto: int) -> int | None:
        with self.runner.lock:
            return self.runner.log.stream_version(stream, upto)

    # -- transcripts (the search table, then the log) and search ----------------------------

    def transcript(self, session_id: str, *, upto_version: int | None = None) -> list[dict[str, Any]]:
        """The session's messages, each with its current `fate` (domain/history.py): the search
        table's, unless the table is behind the session's stream; then the session's edit events
        read from the log decide (AsOf gives the fates of a past moment itself)."""
        stored = self._stored_transcript(session_id, upto_version)
        if stored is None:
            rows = [message_row(e) for e in read_transcript(self.app.events.get, session_id, upto=upto_version)]
            return with_fates(rows, self.history_edits(session_id))
        last = stored[-1]["seq"] if stored else 0
        tail = []
        if (upto_version is None or last < upto_version) and self._log_goes_past(session_id, last):
            tail = [message_row(e) for e in read_transcript(self.app.events.get, session_id, after=last,
                                                             upto=upto_version)]
        if tail or self._session_goes_past(session_id):
            return with_fates(stored + tail, self.history_edits(session_id))
        return stored

    def history_edits(self, session_id: str) -> tuple[HistoryEdit, ...]:
        """The edits of the session's agent history, read from its events in the log."""
        return edits_in(self.app.events.get(session_stream(session_id)))

    def _session_goes_past(self, session_id: str) -> bool:
        """Whether the session's stream has events the search table has not seen (True when it
        cannot tell cheaply): an edit among them would change a stored message's fate."""
        log = self.runner.log
        if log.sql is None:
            return True
        stream = str(session_stream(session_id))
        with self.runner.lock:
            seen = self.runner.positions().get("search", 0)
            return log.stream_version(stream, 2**62) != log.stream_version(stream, seen)

    def _log_goes_past(self, session_id: str, seq: int) -> bool:
        """Whether the log holds a message of the session after `seq` (True when it cannot tell cheaply)."""
        log = self.runner.log
        if log.sql is None:
            return True
        with self.runner.lock:
            newest = log.stream_version(str(transcript_id(session_id)), 2**62)
        return newest is not None and newest > seq

    def _stored_transcript(self, session_id: str, upto_version: int | None) -> list[dict[str, Any]] | None:
        """The messages the search projection holds, None if it cannot tell (the log then)."""
        with self.runner.lock:
            if self._stored_transcripts is None:
                self._stored_transcripts = "search" in self.runner.projections and \
                    search_views.holds_transcripts(self.runner.db)
            if not self._stored_transcripts:
                return None
            try:
                return search_views.messages(self.runner.db, session_id, upto_version)
            except sqlite3.DatabaseError:
                return None  # damaged: the log holds every message

    def search(self, query: str, **filters: Any) -> list[SearchHit]:
        return [SearchHit(**hit) for hit in search_query.run(self.runner, query, **filters)]

    # -- the log itself ----------------------------------------------------------------------

    def message_events(self, session_id: str) -> list[MessageAppended]:
        """The session's messages as the log holds them: MessageAppended events, in order
        (`transcript` gives the same messages as rows)."""
        return read_transcript(self.app.events.get, session_id)

    def first_event(self, stream: UUID) -> Any | None:
        """A stream's first event (None: the log has no such stream)."""
        return next(iter(self.app.events.get(stream, limit=1)), None)

    def events_of(self, topic: str) -> list[Any]:
        """Every event of one topic in the log, oldest first."""
        with self.runner.lock:
            log = self.runner.log
            return [log.decode(row) for row in log.scan(0, log.head(), (topic,))]
