"""The public Python API: open a store, route messages, change sessions, read the projections."""

from __future__ import annotations

import os
import socket
import sqlite3
import uuid as _uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterable
from uuid import UUID

from .clock import Clock, SessionIdFactory, SystemClock, hermes_session_id, lease_time
from .commands.batching import BatchCommands
from .commands.context import CommandContext
from .commands.delivery import Attempt, DeliveryCommands, Sender
from .commands.fork import ForkCommands
from .commands.inbound import Accepted, InboundCommands
from .commands.keeper import Keeper
from .commands.recovery import BootReport, RecoveryCommands, RecoveryReport, SweepReport, SweepSender
from .commands.rotation import RotationCommands
from .commands.routing import RouteResult, RoutingCommands
from .commands.runner import TurnRunner
from .commands.senders import require_sender
from .commands.slash import CommandResult, SlashCommands
from .commands.lease import LeaseCommands, LeaseToken, MessageRecord
from .commands.turn import Responder, TurnOutcome, TurnParts, reply_obligation
from .storage import backend as storage_backend
from .config import EngineConfig
from .domain.gateway import Gateway
from .domain.transcript import transcript_id
from .projections.usage import usage_of
from .export import export_lineage, export_session
from .hermes.exporter import ExportReport, export_home
from .hermes.importer import BATCH_MESSAGES, HermesImporter, ImportReport
from .timetravel import AsOf, diff as diff_moments, parse_moment
from .domain.source import SessionSource
from .errors import AmbiguousKey, InvalidRequest, NotFound
from .domain.collisions import refuse_colliding_keys
from .domain.source import quoted
from .domain.inbox import HUMAN
from .projections.routing import RoutesProjection, SessionsProjection
from .projections.runner import ProjectionRunner
from .projections.timeline import TimelineProjection
from .storage.chain import ChainBreak, ChainReport, ChainSealer
from .projections.route_history import RouteHistoryProjection
from .projections.summaries import summarize
from .projections.ledger import LedgerProjection
from .projections.leases import LeasesProjection
from .projections.queue import QueueProjection
from .projections.search import SearchProjection
from .maintenance import Maintenance
from .projections.views import Views

DEFAULT_DB = "turnlog.db"
CLOSE_WAIT_S = 5.0

_ROUTING_JSON_README = (
    "Routing map exported by turnlog from its event log (sessions.json-compatible). "
    "Keys starting with '_' are not routes."
)


@dataclass(frozen=True)
class HistoryEntry:
    position: int
    at: str
    event: str
    actor: str | None
    cause: str | None
    session_id: str | None
    session_key: str | None
    data: dict[str, Any]
    summary: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Turnlog:
    """One gateway's session engine on one event log.

    Thread-safe: share one instance between the threads of a process. Several processes may open
    the same SQLite file (or PostgreSQL database) at once.
    """

    def __init__(self, location: str | os.PathLike[str] = DEFAULT_DB, *, config: EngineConfig | None = None,
                 clock: Clock | None = None, session_ids: SessionIdFactory | None = None,
                 views: str | None = None, owner: str | None = None, read_only: bool = False,
                 create: bool = True, lock_wait: float | None = None) -> None:
        """`read_only`: never write a byte (no table creation, no catch-up, no sealing, no marker;
        SQLite opened by a `mode=ro` URI): the read models are read as of their positions
        (`projections_behind()` tells how far behind the log they are). `create`: make the
        database when it is missing (never when read-only). A file that is not a turnlog
        database is refused (StoreError) before anything is written (storage/dbfile.py).
        `lock_wait`: how long catching the read models up waits for another process's write lock
        before the reads answer, for the rest of this open, from the models as of their
        positions (`stale`); None: as long as any write waits."""
        self.read_only = read_only
        self.backend = storage_backend.create(location, views).prepare(read_only=read_only,
                                                                       create_missing=create and not read_only)
        self.config = config or EngineConfig()
        self.clock = clock or SystemClock()
        self.app = self.backend.open_application()
        self.ctx = CommandContext(self.app, self.clock, session_ids or hermes_session_id, self.config,
                                  read_only=read_only)
        # Who this process is in leases and delivery attempts: unique per open, readable in audits.
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{_uuid.uuid4().hex[:8]}"
        self.routing = RoutingCommands(self.ctx)
        self.turns = LeaseCommands(self.ctx, self.owner)
        self.deliveries = DeliveryCommands(self.ctx, self.owner)
        # Renews running turns' leases and this boot's heartbeat in the background (keeper.py).
        self.keeper = Keeper(self.ctx, self.turns)
        self.inbound = InboundCommands(self.ctx, self.routing)
        self.runner = TurnRunner(self.inbound, self.routing,
                                 TurnParts(self.ctx, self.turns, self.deliveries, self.keeper))
        self.slash = SlashCommands(self.ctx, self.routing, self.turns, self.inbound)
        self.batches = BatchCommands(self.runner)
        self.rotation = RotationCommands(self.ctx, self.routing, self.turns)
        self.gateway_name: str | None = None
        self.projections = ProjectionRunner(
            self.app, self.backend.views_path,
            [RoutesProjection(), SessionsProjection(), TimelineProjection(),
             LedgerProjection(), QueueProjection(), LeasesProjection(), RouteHistoryProjection(),
             SearchProjection()],
            read_only=read_only, backend=self.backend,
        )
        self.chain = ChainSealer(self.app, self.projections.db) if not read_only else _read_only_chain(self)
        self.maintenance = Maintenance(self.projections, self.chain, read_only=read_only,
                                       display=self.backend.display, lock_wait=lock_wait)
        # Reads go through the views; writable, the facade catches the read models up first.
        self.views = Views(self.projections, self.app, refresh=self.catch_up)
        self.recovery = RecoveryCommands(self.ctx, self.turns, self.deliveries, self.views)
        self.recovery.keeper = self.keeper
        self.forks = ForkCommands(self.ctx)

    # -- lifecycle --------------------------------------------------------------------------

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Wait up to `wait_s` seconds for the turns running in this process to end, cancel those
        still running (TurnlogClosed is raised in them; their leases are released and their items
        failed), then close the store."""
        self.runner.close(wait_s)
        self.keeper.close()
        self.projections.close()
        self.app.close()

    def __enter__(self) -> "Turnlog":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- routing ----------------------------------------------------------------------------

    def get_or_create_session(self, source: SessionSource, force_new: bool = False,
                              touch_activity: bool = True, *, actor: str | None = None,
                              cause: str | None = None) -> RouteResult:
        return self.routing.get_or_create_session(source, force_new=force_new, touch_activity=touch_activity,
                                                  actor=actor, cause=cause)

    def switch_session(self, key: str | SessionSource, session_id: str, *, actor: str = "api",
                       cause: str = "switch_session", force: bool = False) -> RouteResult | None:
        """Point a routing key at an existing session; a session that belongs to another key raises
        SessionOwnedElsewhere unless force=True."""
        route_id = self._route_id(key, must_exist=False)
        if route_id is None:
            return None
        return self.routing.switch_session(route_id, session_id, actor=actor, cause=cause, force=force)

    def suspend(self, key_or_session: str | SessionSource, reason: str = "operator", *,
                actor: str = "api", cause: str = "suspend") -> bool:
        return self.routing.change_session(self._session_id(key_or_session), "suspend",
                                           actor=actor, cause=cause, reason=reason)

    def mark_resume_pending(self, key_or_session: str | SessionSource, reason: str = "restart_timeout", *,
                            actor: str = "api", cause: str = "mark_resume_pending") -> bool:
        return self.routing.change_session(self._session_id(key_or_session), "mark_resume_pending",
                                           actor=actor, cause=cause, reason=reason)

    def clear_resume_pending(self, key_or_session: str | SessionSource, *, actor: str = "api",
                             cause: str = "clear_resume_pending") -> bool:
        return self.routing.change_session(self._session_id(key_or_session), "clear_resume_pending",
                                           actor=actor, cause=cause)

    # -- turns: lease, transcript, delivery ----------------------------------------------

    def acquire_lease(self, session_id: str, owner_key: str, generation: int = 0, timeout: float | None = None,
                      *, actor: str | None = None, cause: str = "turn") -> LeaseToken:
        """Take the session's turn lease, waiting up to `timeout` s; raises LeaseTimeout."""
        return self.turns.acquire(session_id, owner_key, generation=generation, timeout=timeout, actor=actor,
                                  cause=cause)

    def release_lease(self, token: LeaseToken, outcome: str = "completed") -> bool:
        return self.turns.release(token, outcome)

    def renew_lease(self, token: LeaseToken) -> None:
        self.turns.renew(token)

    def lease_holder(self, session_id: str) -> dict[str, Any] | None:
        return self.turns.holder(session_id)

    def append_message(self, token: LeaseToken, role: str, content: str, *, cause: str = "turn",
                       **fields: Any) -> MessageRecord:
        """Append to the token's session transcript; refused (StaleLease) if the lease moved on."""
        return self.turns.append(token, role, content, cause=cause, **fields)

    def record_reply(self, token: LeaseToken, content: str, *, reply_to: SessionSource | None = None,
                     internal: bool = False, inbound_message_id: str | None = None,
                     cause: str = "turn", **fields: Any) -> tuple[MessageRecord, _uuid.UUID | None]:
        """Append the assistant reply and, in the same transaction, its delivery obligation.

        Returns the message and the delivery id (None when nothing is owed: silence on an internal turn).
        """
        seq = self.turns.next_seq(token)
        event = self.turns.message_event(token, seq, "assistant", content, cause=cause, **fields)
        obligation = reply_obligation(self.deliveries, token, seq, content, session_key=token.owner_key,
                                      reply_to=reply_to.to_dict() if reply_to is not None else None,
                                      internal=internal, inbound_message_id=inbound_message_id, cause=cause)
        position = self.turns.fenced_save(token, event, *([obligation] if obligation else []), last_seq=seq,
                                          cause=cause)
        return MessageRecord(token.session_id, seq, "assistant", position), (obligation.id if obligation else None)

    def attempt_delivery(self, delivery_id: _uuid.UUID) -> Attempt:
        return self.deliveries.attempt(delivery_id)

    def settle_delivery(self, delivery_id: _uuid.UUID, error: str | None = None) -> str:
        return self.deliveries.settle(delivery_id, error=error).state

    def deliver(self, delivery_id: _uuid.UUID, send: Sender) -> str:
        """Attempt, send and settle one delivery; returns its state."""
        return self.deliveries.deliver(delivery_id, send).state

    def needs_compression(self, token: LeaseToken, *, prompt_tokens: int, context_length: int) -> bool:
        """Spec §11 hygiene: 0.85 of the context, or 5000 messages, with at least 4 messages."""
        return self.rotation.needs_compression(token, prompt_tokens=prompt_tokens, context_length=context_length)

    def rotate_session(self, token: LeaseToken, source: SessionSource) -> LeaseToken:
        """Continue the conversation in a child session; returns the turn's token on the child."""
        return self.rotation.rotate(token, source)

    def transcript(self, session_id: str) -> list[dict[str, Any]]:
        """The session's messages in order, as the log holds them (always current)."""
        return self.views.transcript(session_id)

    def usage(self, session_id: str) -> list[dict[str, Any]]:
        """Model and token usage recorded with the session's messages (rich replies), by seq."""
        return usage_of(self.app, self.turns.transcript(session_id))

    # -- the gateway loop: inbound queue, turns, commands ---------------------------------

    def accept(self, source: SessionSource, text: str, *, kind: str = HUMAN, reply: str | None = None) -> Accepted:
        """Durably accept an inbound message (kind human, queued or wakeup) before processing it.

        A repeat (its message_id already accepted on this key, or the same text from the same sender
        within `EngineConfig.dedup_window_s`) is recorded as refused and never run: `duplicate` says why.
        `reply`: a reply already given to it (replaying traffic): the turn that runs it records that.
        """
        return self.inbound.accept(source, text, kind=kind, reply=reply)

    def run_next(self, source: SessionSource, responder: Responder, sender: Sender, *,
                 timeout: float | None = None) -> TurnOutcome | None:
        """Run the oldest waiting item of the source's key as one turn."""
        return self.runner.run_next(source, responder, sender, timeout=timeout)

    def handle_message(self, source: SessionSource, text: str, responder: Responder, sender: Sender, *,
                       timeout: float | None = None) -> list[TurnOutcome]:
        return self.runner.handle_message(source, text, responder, sender, timeout=timeout)

    def run_due_batches(self, responder: Responder, sender: Sender) -> list[TurnOutcome]:
        """With text batching on (EngineConfig.text_batching): run every key's burst whose debounce
        window is over. Call it on a timer; `next_batch_due()` says when the next one is ready."""
        outcomes = []
        for source in self.pending_inbound():
            outcomes += self.batches.run_due(source, responder, sender)
        return outcomes

    def next_batch_due(self) -> Any:
        """When the next held-back burst becomes ready to run (None when none waits)."""
        return self.batches.next_due(self.pending_inbound())

    def command(self, source: SessionSource, text: str) -> CommandResult:
        """Handle /new, /reset, /stop, /queue TEXT or /resume ID."""
        return self.slash.handle(source, text)

    def queue(self, key: str | SessionSource) -> list[dict[str, Any]]:
        """Items waiting (or running) for a routing key, oldest first."""
        self.catch_up()
        return [r.to_dict() for r in self.views.queue(self._route_ids(key))]

    def ledger(self, status: str | None = None, *, limit: int | None = None) -> list[dict[str, Any]]:
        """The delivery ledger, oldest first: only `status`'s rows, at most `limit` of them."""
        if limit is not None and limit < 0:
            raise InvalidRequest(f"bad limit {limit} (expected 0 or more)")
        self.catch_up()
        out = []
        for row, content in self.views.ledger(status, limit):
            d = row.to_dict()
            del d["recorded_position"]
            out.append({**d, "content": content})
        return out

    def show(self, key_or_session: str | SessionSource) -> dict[str, Any]:
        """A session's flags, lease holder and transcript (read from the log)."""
        self.catch_up()
        session_id = self._session_id(key_or_session)
        return {**self.session(session_id), "lease": self.lease_holder(session_id),
                "messages": self.transcript(session_id)}

    # -- gateway lifecycle and crash recovery ---------------------------------------------

    def start_gateway(self, name: str = "main") -> BootReport:
        """Record this boot (its id is this instance's owner) and recover what earlier boots left."""
        self.gateway_name = name
        return self.recovery.start(name)

    def drain(self, reason: str = "restart", timeout_s: float = 0.0) -> bool:
        """Mark running turns resume_pending, wait up to timeout_s, stop; True if the stop was clean."""
        return self.recovery.begin_drain(self._gateway(), reason, timeout_s)

    def stop_gateway(self) -> None:
        """A clean stop with nothing running (use drain() when turns may be running)."""
        self.recovery.stop(self._gateway(), clean=True)

    def _gateway(self) -> str:
        if self.gateway_name is None:
            raise InvalidRequest("this Turnlog has not started a gateway (call start_gateway first)")
        return self.gateway_name

    def recover(self, name: str = "main", *, dry_run: bool = False) -> RecoveryReport:
        """Recover unclean boots of gateway `name` from outside it (an operator, `turnlog recover`)."""
        return self.recovery.recover(name, dry_run=dry_run, current_boot=None)

    def sweep_deliveries(self, send: SweepSender, *, platforms: set[str] | None = None) -> SweepReport:
        """Deliver what earlier boots owed; `send(target, text)` is the platform send (checked up
        front: InvalidRequest for a sender that cannot take two arguments)."""
        require_sender(send, ("target", "text"), "sweep_deliveries")
        return self.recovery.sweep(send, platforms=platforms)

    def resume_candidates(self, name: str | None = None) -> list[dict[str, Any]]:
        return self.recovery.resume_candidates(name or self.gateway_name or "main")

    def resume_interrupted(self, responder: Responder, sender: Sender, *,
                           name: str | None = None) -> list[TurnOutcome]:
        """Auto-resume once every candidate of docs/behaviour.md §7.3 (none during a boot storm)."""
        require_sender(sender, ("text",), "resume_interrupted")
        outcomes = []
        for row in self.resume_candidates(name):  # caught up by recovery
            in_flight = self._in_flight_item(row["session_id"])
            outcome = self.runner.resume(session_id=row["session_id"], session_key=row["session_key"],
                                         reason=row["resume_reason"], in_flight=in_flight, responder=responder,
                                         sender=sender)
            if outcome is not None:  # None: answered or settled meanwhile, nothing left to resume
                outcomes.append(outcome)
        return outcomes

    def _in_flight_item(self, session_id: str) -> tuple[_uuid.UUID, Any] | None:
        ref = self.views.started_item(session_id)
        if ref is None:
            return None
        inbox_uuid = _uuid.UUID(ref.inbox_id)
        inbox = self.ctx.get(inbox_uuid, fresh=True)
        item = next((i for i in inbox.in_flight() if i.item_id == ref.item_id), None) if inbox else None
        return (inbox_uuid, item) if item is not None else None

    def pending_inbound(self) -> list[SessionSource]:
        """One source per routing key that has messages waiting: what a gateway runs after a restart."""
        self.catch_up()
        sources = []
        for inbox_text in self.views.inboxes_with_pending():
            inbox = self.ctx.get(_uuid.UUID(inbox_text), fresh=True)
            pending = inbox.pending() if inbox is not None else []
            if pending and pending[0].source:
                sources.append(SessionSource.from_dict(pending[0].source))
        return sources

    def status(self, name: str = "main") -> dict[str, Any]:
        """Last boot and how it ended, active turns (and leases left expired by their holders), pending
        deliveries, resume_pending and suspended sessions."""
        self.catch_up()
        gateway = self.recovery.gateway(name)
        boot = gateway.last_boot if gateway is not None else None
        held = self.views.held_leases()
        now = lease_time(self.clock)

        def expired(row: Any) -> bool:
            return row.expires_at is not None and datetime.fromisoformat(row.expires_at) <= now
        return {
            "gateway": name,
            "last_boot": None if boot is None else {
                **{k: boot[k] for k in ("boot_id", "pid", "host", "state", "drain_reason", "drain_timed_out",
                                        "recovered")},
                "started_at": boot["started_at"].isoformat(),
                "stopped_at": boot["stopped_at"].isoformat() if boot["stopped_at"] else None,
                # A boot still marked running or draining is either alive or died without a stop; once
                # recovered it is known to have died, so it did not end clean.
                "ended_clean": Gateway.ended_clean(boot)
                if boot["state"] not in ("running", "draining") or boot["recovered"] else None},
            # A lease past its expiry is no running turn: its holder stopped renewing it (it died, or
            # left it behind), so it is recovery's to close or the next taker's.
            "active_turns": [r.to_dict() for r in held if not expired(r)],
            "expired_leases": [r.to_dict() for r in held if expired(r)],
            "pending_deliveries": [r.to_dict() for r in self.views.owed_deliveries()],
            "resume_pending": [{"session_id": r.session_id, "session_key": r.session_key, "resume_reason": r.reason,
                                "resume_marked_at": r.marked_at} for r in self.views.resume_pending_any()],
            "suspended": [{"session_id": r.session_id, "session_key": r.session_key, "suspend_reason": r.reason}
                          for r in self.views.suspended()],
        }

    # -- reads (each catches the projections up first: read-your-writes) -------------------

    def catch_up(self, names: Iterable[str] | None = None) -> int:
        """Bring the read models and the hash chain up to the log (read-your-writes): the facade's
        read methods do this first. Read-only: nothing; the models are read as of their positions."""
        return self.maintenance.catch_up(names)

    def routes(self) -> list[dict[str, Any]]:
        self.catch_up()
        return [r.to_dict() for r in self.views.routes()]

    def sessions(self) -> list[dict[str, Any]]:
        self.catch_up()
        return [r.to_dict() for r in self.views.sessions()]

    def session(self, session_id: str) -> dict[str, Any]:
        self.catch_up()
        row = self.views.session(session_id)
        if row is None:
            raise NotFound(f"no session {session_id!r}")
        return row.to_dict()

    def history(self, key_or_session: str | SessionSource, *, since: str | int | None = None,
                until: str | int | None = None, types: Iterable[str] | None = None) -> list[HistoryEntry]:
        """The audit timeline of a key or a session: every event with time, actor, cause and a summary.

        since/until are ISO times or log positions `#N` (inclusive); types are event names.
        """
        self.catch_up()
        names = list(types or [])
        window = {"since": parse_moment(self.views, since, after=True) if since is not None else None,
                  "until": parse_moment(self.views, until) if until is not None else None}
        if isinstance(key_or_session, str) and self._is_session(key_or_session):
            rows = self.views.history(session=key_or_session, types=names, **window)
        else:
            rows = self.views.history(route_ids=self._route_ids(key_or_session), types=names, **window)
        return [HistoryEntry(**r, summary=summarize(r["event"], r["data"])) for r in rows]

    # -- audit and time travel -------------------------------------------------------------

    def at(self, when: str | int) -> AsOf:
        """The gateway as of a log position `#N` (or an int) or an ISO time."""
        self.catch_up()
        return AsOf(self.views, self.app, parse_moment(self.views, when))

    def diff(self, a: str | int, b: str | int, *, key: str | None = None,
             max_events: int | None = None) -> dict[str, Any]:
        """What changed between two moments, grouped by routing key and by session (only `key`'s,
        reading only its events). `max_events`: refuse (TooLarge) a diff that would read more."""
        self.catch_up()
        return diff_moments(self.views, self.app, parse_moment(self.views, a), parse_moment(self.views, b),
                            key=key, max_events=max_events)

    def seal(self) -> int:
        """Extend the hash chain over unsealed events: 0 on SQLite, where each write seals its
        own events; a PostgreSQL log is sealed after the fact (reads do this too)."""
        return self.maintenance.seal()

    def verify_chain(self) -> list[ChainBreak]:
        """Recompute the hash chain from the log: the positions of edited, deleted, moved or unsealed events."""
        return self.maintenance.verify_chain()

    def chain_report(self) -> ChainReport:
        """verify_chain with the range of events sealed late (written before sealing on write)."""
        return self.maintenance.chain_report()

    def export(self, key_or_session: str | SessionSource, *, lineage: bool = False) -> dict[str, Any]:
        """Hermes-compatible export of a session (docs/behaviour.md §10), or of its whole compression lineage."""
        self.catch_up()
        session_id = self._session_id(key_or_session)
        return export_lineage(self.views, session_id) if lineage else export_session(self.views, session_id)

    def fork(self, session_id: str, at: str | int, *, to_key: str | SessionSource | None = None,
             actor: str = "api") -> str:
        """A new session whose transcript is `session_id`'s up to moment `at`; returns its id."""
        self.catch_up()
        if not self._is_session(session_id):
            raise NotFound(f"no session {session_id!r}")
        position = parse_moment(self.views, at)
        moment = AsOf(self.views, self.app, position)
        if moment.session(session_id) is None:
            raise InvalidRequest(f"session {session_id} did not exist yet at #{position}: fork at or after its creation")
        upto = moment.version(str(transcript_id(session_id))) or 0
        route_id = self._route_id(to_key) if to_key is not None else None
        return self.forks.fork(session_id, upto, at_position=position, route_id=route_id, actor=actor)

    def import_hermes(self, hermes_home: str | os.PathLike[str], *, profile: str | None = None,
                      dry_run: bool = False, progress: Callable[[int, int], None] | None = None,
                      batch_messages: int = BATCH_MESSAGES, force: bool = False) -> ImportReport:
        """Import a Hermes home's sessions, transcripts and routing (idempotent; see turnlog.hermes).

        `progress(done, total)` is called after each batch (one transaction of about
        `batch_messages` messages). `force` imports a home whose schema version is unknown."""
        def known() -> dict[str, str]:
            self.catch_up()  # a killed earlier run's sessions count as imported
            return {r.session_id: r.created_reason for r in self.views.sessions()}
        return HermesImporter(self.ctx, known).run(os.fspath(hermes_home), profile=profile, dry_run=dry_run,
                                            progress=progress, batch_messages=batch_messages, force=force)

    def export_hermes(self, out_home: str | os.PathLike[str], *, force: bool = False) -> ExportReport:
        """Write this log's sessions, transcripts and routing as a Hermes 0.19.0 home (`force`:
        replace the files of an existing one)."""
        self.catch_up()
        return export_home(os.fspath(out_home), views=self.views, routing_map=self.export_routing, clock=self.clock,
                           force=force)

    def export_routing(self) -> dict[str, Any]:
        """The routing map as Hermes' sessions.json: session_key -> entry (docs/behaviour.md §3.1)."""
        sessions = {s["session_id"]: s for s in self.sessions()}  # caught up
        out: dict[str, Any] = {"_README": _ROUTING_JSON_README}  # noqa: E501
        routes = self.routes()
        refuse_colliding_keys(routes)  # sessions.json holds one entry per key string
        for route in routes:
            session = sessions.get(route["session_id"])
            if session is None:
                continue
            out[route["session_key"]] = _hermes_entry(route, session)
        return out

    def rebuild(self, names: Iterable[str] | None = None) -> int:
        """rebuild_projections(names), returning the number of log positions it covered."""
        return int(self.rebuild_projections(names)["events"])

    # -- search and projection maintenance --------------------------------------------------

    def search(self, query: str, *, session: str | None = None, key: str | None = None,
               platform: str | None = None, role: str | None = None, since: Any = None, until: Any = None,
               limit: int = 20) -> list[dict[str, Any]]:
        """Full-text search of every transcript (docs/behaviour.md §10), best match first.

        Words are ranked by bm25 with a highlighted snippet; Chinese, Japanese and Korean text is
        found by substring. `since` (inclusive) and `until` (exclusive) are ISO times with a zone
        or dates (midnight UTC). Raises InvalidRequest for a query over 2048 characters.
        """
        self.catch_up(["search"])
        return self.views.search(query, session=session, key=key, platform=platform,
                                role=role, since=since, until=until, limit=limit)

    def rebuild_projections(self, names: Iterable[str] | None = None, *,
                            progress: Callable[[int, int], None] | None = None,
                            pause: float = 0.0, batch: int | None = None,
                            workers: int | None = None) -> dict[str, Any]:
        """Rebuild read models from the log into fresh tables and swap them in; resumes a rebuild
        that was killed. `progress(done, total)` is called after each batch; `batch` events per
        transaction and `pause` seconds between batches let a live gateway's writes through;
        `workers` processes share the work (default: two for a large rebuild on two cores or
        more, when this process has one thread). Returns counts and seconds."""
        return self.maintenance.rebuild(names, progress=progress, pause=pause, batch=batch, workers=workers)

    @property
    def stale(self) -> bool:
        """Whether reads answer from the read models as of their positions, without catching
        them up: a read-only open, or one whose catch-up gave way to a writer (`lock_wait`)."""
        return self.maintenance.stale

    def projections_behind(self) -> int:
        """How many log positions the furthest-behind read model lags the log (0: caught up)."""
        return self.maintenance.behind()

    def projection_status(self) -> list[dict[str, Any]]:
        """Each read model's position, the log's head, and the position of an unfinished rebuild."""
        return self.maintenance.status()

    def verify(self, names: Iterable[str] | None = None) -> dict[str, Any]:
        """Rebuild read models from the log into a temporary file and compare them row by row with
        the live ones; `ok` is False and `mismatches` names the rows that differ."""
        return self.maintenance.verify(names)

    def doctor(self, *, repair: bool = True, deep: bool = False) -> dict[str, Any]:
        """Check the read models (SQLite, full-text indexes, unfinished rebuilds, missing tables;
        with deep=True also compare each with a rebuild) and, unless repair=False, rebuild what is
        damaged from the log. The log is never changed."""
        return self.maintenance.doctor(repair=repair, deep=deep)

    # -- resolving what the caller named ---------------------------------------------------

    def routing_key(self, source: SessionSource) -> str:
        return self.routing.routing_key(source).key

    # Names are resolved through the read models, caught up first (writable opens).

    def _is_session(self, text: str) -> bool:
        self.catch_up()
        return self.views.session_exists(text)

    def _route_ids(self, key: str | SessionSource) -> list[str]:
        self.catch_up()
        if isinstance(key, SessionSource):
            return [str(self.routing.routing_key(key).route_id)]
        # A route id names one route; a key string may name several (ids holding ':' collide).
        route_ids = self.views.route_ids_of_key(key)
        if not route_ids:
            raise NotFound(f"no routing key or session {quoted(key)}")
        if len(route_ids) > 1:
            raise AmbiguousKey(f"routing key {quoted(key)} names {len(route_ids)} routes (chat or user ids holding ':'):"
                               f" give one of their route ids: {', '.join(route_ids)}")
        return route_ids

    def _route_id(self, key: str | SessionSource, *, must_exist: bool = True) -> UUID | None:
        try:
            route_ids = self._route_ids(key)
        except NotFound:
            if must_exist:
                raise
            return None
        if len(route_ids) > 1:
            raise InvalidRequest(f"routing key {key!r} names {len(route_ids)} routes (ids containing ':');"
                                 " pass the SessionSource instead")
        return UUID(route_ids[0])

    def _session_id(self, key_or_session: str | SessionSource) -> str:
        if isinstance(key_or_session, str) and self._is_session(key_or_session):
            return key_or_session
        route_id = self._route_id(key_or_session)
        session_id = self.views.current_session(str(route_id))
        if session_id is None:
            raise NotFound(f"routing key {key_or_session!r} has no current session")
        return session_id


def _read_only_chain(t: "Turnlog") -> ChainSealer | None:
    """The hash chain as sealed so far, or None when this file has none (sealing would write)."""
    try:
        return ChainSealer(t.app, t.projections.db)
    except sqlite3.DatabaseError:
        return None


_AUTO_RESET_REASONS = {"idle", "daily", "suspended", "resume_pending_expired"}


def _hermes_entry(route: dict[str, Any], session: dict[str, Any]) -> dict[str, Any]:
    reason = session["created_reason"]
    return {
        "session_key": route["session_key"],
        "session_id": session["session_id"],
        "created_at": session["created_at"],
        "updated_at": session["updated_at"],
        "origin": route["origin"],
        "display_name": session["display_name"],
        "platform": route["platform"],
        "chat_type": route["chat_type"] or "dm",
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "total_tokens": 0,
        "last_prompt_tokens": 0,
        "estimated_cost_usd": 0.0,
        "cost_status": "unknown",
        "was_auto_reset": reason in _AUTO_RESET_REASONS,
        "auto_reset_reason": reason if reason in _AUTO_RESET_REASONS else None,
        "reset_had_activity": False,
        "is_fresh_reset": reason == "force_new",
        "expiry_finalized": False,
        "suspended": session["suspended"],
        "resume_pending": session["resume_pending"],
        "resume_reason": session["resume_reason"],
        "last_resume_marked_at": session["resume_marked_at"],
        "model_override": None,
    }


def open(location: str | os.PathLike[str] = DEFAULT_DB, **options: Any) -> Turnlog:  # noqa: A001
    return Turnlog(location, **options)
