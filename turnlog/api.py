"""The public Python API: open a store, route messages, change sessions, read the projections."""

from __future__ import annotations

import os
import socket
import sqlite3
import uuid as _uuid
import warnings
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable
from uuid import UUID

from .clock import Clock, SessionIdFactory, SystemClock, hermes_session_id, lease_time
from .commands.archive import ArchiveCandidate, ArchiveCommands, ArchiveReport, ArchiveRestoreReport
from .commands.batching import BatchCommands
from .commands.command_replies import CommandReplies
from .commands.compaction import Compaction, CompactionCommands
from .commands.context import CommandContext
from .commands.delivery import DeliveryCommands, Sender
from .domain.delivery import STATES as DELIVERY_STATES
from .commands.delegations import DelegationCommands, StopHook
from .commands.fork import ForkCommands
from .commands.branch import BranchCommands
from .commands.session_replies import SessionReplies
from .commands.titles import TitleCommands
from .commands.history_edits import HistoryEdits, UndoResult
from .commands.inbound import Accepted, InboundCommands
from .commands.keeper import Keeper
from .commands.boots import BootCommands, BootReport
from .commands.gateways import GatewayRecords
from .commands.recovery import RecoveryCommands, RecoveryReport
from .commands.rekey import RekeyCommands, RekeyReport
from .commands.sweep import Reconcile, SweepCommands, SweepReport, SweepSender
from .commands.rotation import RotationCommands
from .commands.routing import RouteResult, RoutingCommands
from .commands.runner import TurnRunner
from .commands.recorder import Recorder
from .commands.senders import require_sender
from .commands.slash import CommandResult, SlashCommands
from .commands.lease import LeaseCommands
from .commands.message_fates import MessageFate, message_fates
from .commands.turn import Responder, RunningTurns, TurnOutcome, TurnParts
from .storage import backend as storage_backend
from .storage import backup as backups, reclaim
from .storage.reclaim import Reclaimed
from .storage import encryption as encryption_setup
from .storage.keys import MasterKey, asked_once
from .commands.erasure import EraseCommands
from .storage.backup import BackupReport, RestoreReport
from .storage.log_copy import CopyReport
from .turn_operations import TurnOperations
from .config import GC_BETWEEN_TURNS, EngineConfig
from .gc_turns import EngineTurns
from .domain.transcript import transcript_id
from .projections.usage import usage_of
from .export import export_lineage, export_session
from .hermes.exporter import ExportReport, export_home
from .hermes.routing_map import routing_map
from .hermes.importer import BATCH_MESSAGES, HermesImporter, ImportReport
from .hermes.formats import check_home
from .closing import mark_closed, opened, refuse_after_close, require_open, saying_damage, tie
from .timetravel import AsOf, diff as diff_moments, parse_moment
from .domain.source import SessionSource
from .errors import AmbiguousKey, InvalidRequest, KeySettingsIgnored, NotFound
from .domain.key_settings import KeySettings
from .domain.source import quoted, require_str
from .domain.event_names import unknown_event_names
from .domain.inbox import HUMAN, item_with_text
from .projections.routing import RoutesProjection, SessionsProjection
from .projections.runner import ProjectionRunner
from .projections.timeline import TimelineProjection
from .storage.chain import ChainSealer
from .projections.route_history import RouteHistoryProjection
from .projections.summaries import summarize
from .projections.ledger import LedgerProjection
from .projections.ledger_views import LedgerEntry
from .projections.leases import LeasesProjection
from .projections.delegations import DelegationsProjection
from .projections.delegations_views import DelegationRow
from .projections.counts import CountsProjection
from .projections.queue import QueueProjection
from .projections.queue_views import QueueDepth, QueueItemRow
from .projections import log_window
from .projections.log_window import LogEvent, TurnSpan
from .projections.routing_views import RouteRow, SessionRow
from .projections.search_hit import SearchHit
from .gateway_status import BootSummary, GatewayStatus, ResumePendingSession, boot_summaries, gateway_status
from .projections.search import SearchProjection
from .maintenance import Maintenance
from .data_lifecycle import DataLifecycle, EncryptionReport, EraseReport
from .deprecated_names import DeprecatedNames
from .metrics import LogCounts, ProjectionLag, registry as metrics_registry
from .projections.views import COMMAND_READ_MODELS, Views

DEFAULT_DB = "turnlog.db"
CLOSE_WAIT_S = 5.0

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


class Turnlog(DeprecatedNames):
    """One gateway's session engine on one event log.

    Thread-safe: share one instance between the threads of a process. Several processes may open
    the same SQLite file (or PostgreSQL database) at once.
    """

    def __init__(self, location: str | os.PathLike[str] = DEFAULT_DB, *, config: EngineConfig | None = None,
                 clock: Clock | None = None, session_ids: SessionIdFactory | None = None,
                 views: str | None = None, owner: str | None = None, read_only: bool = False,
                 create: bool = True, lock_wait: float | None = None,
                 on_stop_delegation: StopHook | None = None, tracer_provider: Any = None,
                 master_key: MasterKey = None, encryption: bool | None = None) -> None:
        """`read_only`: never write a byte (no table creation, no catch-up, no sealing, no marker;
        SQLite opened by a `mode=ro` URI): the read models are read as of their positions
        (`projections_behind()` tells how far behind the log they are). `create`: make the
        database when it is missing (never when read-only). A file that is not a turnlog
        database is refused (StoreError) before anything is written (storage/dbfile.py).
        `lock_wait`: how long catching the read models up waits for another process's write lock
        before the reads answer, for the rest of this open, from the models as of their
        positions (`stale`); None: as long as any write waits.
        `on_stop_delegation(handle)`: the gateway's hook that stops one background delegation's
        unit; /stop, /new and /reset call it for each delegation they stop, after recording
        DelegationStopped (a hook that raises is logged; the stop stands). `tracer_provider`: the
        OpenTelemetry provider of the turns' spans (default: the global one; no spans without the
        `otel` extra). `master_key`: the 32-byte master key of encryption at rest, or a callable
        giving it (a KMS hook); without it TURNLOG_MASTER_KEY (base64) or the key file beside the
        database (`<db>.key`) is used. An encrypted database without its key is refused
        (EncryptionKeyMissing) having read and written nothing. `encryption`: whether a new
        database is encrypted (default: yes, unless TURNLOG_ENCRYPTION=0; docs/operations.md)."""
        self._read_only = read_only
        if config is not None and not isinstance(config, EngineConfig):
            raise InvalidRequest(f"config must be an EngineConfig, not {type(config).__name__}")
        self._config = config or EngineConfig()  # its TURNLOG_* values checked before a file is made
        master_key = asked_once(master_key)
        backend = storage_backend.create(location, views)
        opened(self, backend.display)  # the file a DamagedDatabase names
        if create and not read_only:
            encryption_setup.refuse_bad_key_for_new(backend, master_key, enable=encryption)
        self._backend = backend.prepare(read_only=read_only, create_missing=create and not read_only)
        self._clock = clock or SystemClock()
        encryption_setup.refuse_without_key(self._backend, master_key)
        self._app = self._backend.open_application()
        try:
            attached = encryption_setup.attach(self._app, self._backend, master_key, read_only=read_only,
                                               enable=encryption)
        except BaseException:
            self._app.close()
            raise
        # Who this process is in leases and delivery attempts: unique per open, readable in audits.
        self._owner = owner or f"{socket.gethostname()}:{os.getpid()}:{_uuid.uuid4().hex[:8]}"
        self._recorder = Recorder(self._owner, tracer_provider)
        self._ctx = CommandContext(self._app, self._clock, session_ids or hermes_session_id, self._config,
                                   read_only=read_only, recorder=self._recorder)
        self._registry: Any = None  # metrics(): made on first use
        self._routing = RoutingCommands(self._ctx)
        self._leases = LeaseCommands(self._ctx, self._owner)
        self._deliveries = DeliveryCommands(self._ctx, self._owner)
        # Renews running turns' leases and this boot's heartbeat in the background (keeper.py).
        self._keeper = Keeper(self._ctx, self._leases)
        self._inbound = InboundCommands(self._ctx, self._routing)
        self._delegations = DelegationCommands(self._ctx, self._routing, self._inbound, on_stop_delegation)
        gc_turns = CountedTurns(EngineTurns(self._config.gc_mode == GC_BETWEEN_TURNS))  # ready below
        self._runner = TurnRunner(self._inbound, self._routing,
                                  TurnParts(self._ctx, self._leases, self._deliveries, self._keeper,
                                            running=gc_turns),
                                  self._delegations)
        self._compaction = CompactionCommands(self._ctx, self._leases)
        self._batches = BatchCommands(self._runner)
        self._rotation = RotationCommands(self._ctx, self._routing, self._leases)
        self._gateway_name: str | None = None
        self._projections = ProjectionRunner(
            self._app, self._backend.views_path,
            [RoutesProjection(), SessionsProjection(), TimelineProjection(),
             LedgerProjection(), QueueProjection(), LeasesProjection(), RouteHistoryProjection(),
             SearchProjection(), DelegationsProjection(), CountsProjection()],
            read_only=read_only, backend=self._backend,
        )
        self._projections.before_refill = self._ctx.forget_erased
        self._chain = (ChainSealer(self._app, self._projections.db) if not read_only
                       else _read_only_chain(self._app, self._projections))
        self.maintenance = Maintenance(self._projections, self._chain, read_only=read_only,
                                       display=self._backend.display, lock_wait=lock_wait)
        # Reads go through the views; writable, the facade catches the read models up first.
        self._views = Views(self._projections, self._app,
                            refresh=lambda: self.maintenance.catch_up(COMMAND_READ_MODELS))
        self._gateways = GatewayRecords(self._ctx, self._leases, self._views)
        self._recovery = RecoveryCommands(self._ctx, self._leases, self._deliveries, self._views, self._gateways)
        self._boots = BootCommands(self._ctx, self._gateways, self._recovery, keeper=self._keeper)
        self._sweep = SweepCommands(self._ctx, self._deliveries, self._views, self._gateways)
        self._titles = TitleCommands(self._ctx, self._views)
        self._forks = ForkCommands(self._ctx, self._titles)
        replies = SessionReplies(self._ctx, self._routing, self._leases, self._views, self._titles,
                                 BranchCommands(self._ctx, self._routing, self._leases, self._forks, self._titles))
        self._slash = SlashCommands(self._ctx, self._routing, self._leases, self._inbound, replies,
                                    self._compaction, self._delegations)
        self._edits = HistoryEdits(self._ctx, self._leases)
        self._archives = ArchiveCommands(self._ctx, self._views)
        self._routing.restore_archive = lambda path: self._archives.restore(path, actor="system:retention",
                                                                            cause="archived_key_policy")
        self._data = DataLifecycle(
            app=self._app, backend=self._backend, ctx=self._ctx, clock=self._clock, config=self._config,
            master_key=master_key, encryption=attached, read_only=read_only,
            erasure=EraseCommands(self._ctx, self._routing), archives=self._archives, maintenance=self.maintenance,
            projections=self._projections, sessions=self.sessions,
            open_copy=lambda location, views, key: Turnlog(location, views=views, clock=self._clock,
                                                           config=self._config, master_key=key))
        self._ctx.forget_keys = self._data.forget_keys
        self._ctx.erased_keys = self._data.erased_keys
        self._rekeys = RekeyCommands(self._ctx, self._routing, lambda: [r.route_id for r in self.routes()])
        self._warn_if_config_is_overruled()
        self.turns = TurnOperations(self._leases, self._deliveries, self._rotation, self._runner, self._compaction,
                                    CommandReplies(self._ctx, self._routing, self._deliveries))
        tie(self.turns, self)
        tie(self.maintenance, self)
        gc_turns.engine.engine_ready()

    @property
    def owner(self) -> str:
        """Who this Turnlog is in leases, delivery attempts and boots (the `owner` it was opened
        with, or host:pid:random): unique per open, readable in audits."""
        return self._owner

    @property
    def read_only(self) -> bool:
        """Whether it was opened read-only: it writes nothing, and reads the read models as of
        their positions (`maintenance.projections_behind()` says how far behind the log)."""
        return self._read_only

    @property
    def stale(self) -> bool:
        """Whether the reads answer from the read models as of their positions instead of catching
        them up: opened read-only, or another process held the write lock longer than `lock_wait`."""
        return self.maintenance.stale

    # -- lifecycle --------------------------------------------------------------------------

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Wait up to `wait_s` seconds for the turns running in this process to end, cancel those
        still running (TurnlogClosed is raised in them; their leases are released and their items
        failed), then close the store (the `with` block does this)."""
        self._runner.close(wait_s)
        self._keeper.close()
        self._projections.close()
        self._app.close()
        # The asyncio face kept on this Turnlog by turnlog.aio.wrap: its worker threads end with it
        # (idle threads left behind would also keep a later rebuild in this process from forking).
        wrapped = self.__dict__.get("_aio")
        if wrapped is not None:
            wrapped.shutdown_threads()
        # Each public method, and those of its groups, now raises TurnlogClosed (refuse_after_close).
        mark_closed(self, self.turns, self.maintenance)

    def __enter__(self) -> "Turnlog":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- routing ----------------------------------------------------------------------------

    def get_or_create_session(self, source: SessionSource, force_new: bool = False,
                              touch_activity: bool = True, *, actor: str | None = None,
                              cause: str | None = None) -> RouteResult:
        """The session of the source's routing key, made (or replaced, by the reset policy or force_new) as needed."""
        return self._routing.get_or_create_session(source, force_new=force_new, touch_activity=touch_activity,
                                                  actor=actor, cause=cause)

    def key_settings(self) -> KeySettings:
        """The key settings routing follows now: the log's newest (recorded by `rekey`), else the
        EngineConfig's, else the defaults (docs/configuration.md). Read from the log afresh, so
        that this open routes by a rekey made elsewhere from now on."""
        return self._ctx.key_settings(fresh=True)

    def rekey(self, group_sessions_per_user: bool | None = None, thread_sessions_per_user: bool | None = None, *,
              dry_run: bool = False, actor: str = "api", cause: str = "rekey") -> RekeyReport:
        """Change the key settings without losing a session (docs/behaviour.md §18): every live
        session's keys under the new settings are pointed at it, and the settings become part of
        the log (KeySettingsChanged). A flag left None keeps its value. `dry_run`: only the plan."""
        if group_sessions_per_user is None and thread_sessions_per_user is None:
            raise InvalidRequest("rekey needs group_sessions_per_user or thread_sessions_per_user (or both)")
        current = self._ctx.key_settings()
        new = KeySettings(
            current.group_sessions_per_user if group_sessions_per_user is None else group_sessions_per_user,
            current.thread_sessions_per_user if thread_sessions_per_user is None else thread_sessions_per_user)
        return self._rekeys.run(new, dry_run=dry_run, actor=actor, cause=cause)

    def _warn_if_config_is_overruled(self) -> None:
        self._ctx.key_settings(fresh=True)  # routing then reads them from memory
        recorded = self._ctx.recorded_key_settings()
        if recorded is None:
            return
        ignored = self._config.disagreements(KeySettings.from_dict(recorded.new))
        if ignored:
            warnings.warn(f"the log's key settings ({KeySettings.from_dict(recorded.new).describe()}, recorded by"
                          f" {recorded.actor} at {recorded.timestamp.isoformat()}) hold; the EngineConfig's"
                          f" {', '.join(ignored)} is ignored (turnlog rekey changes them)", KeySettingsIgnored,
                          stacklevel=3)

    def switch_session(self, key: str | SessionSource, session_id: str, *, actor: str = "api",
                       cause: str = "switch_session", force: bool = False) -> RouteResult | None:
        """Point a routing key at an existing session; a session that belongs to another key raises
        SessionOwnedElsewhere unless force=True."""
        route_id = self._route_id(key, must_exist=False)
        if route_id is None:
            return None
        return self._routing.switch_session(route_id, session_id, actor=actor, cause=cause, force=force)

    def suspend(self, key_or_session: str | SessionSource, reason: str = "operator", *,
                actor: str = "api", cause: str = "suspend") -> bool:
        """Suspend a session (its id, or a routing key for its current one): the next message on its key
        starts a new one. False when it was already suspended or ended."""
        return self._routing.change_session(self._session_id(key_or_session), "suspend",
                                           actor=actor, cause=cause, reason=reason)

    def mark_resume_pending(self, key_or_session: str | SessionSource, reason: str = "restart_timeout", *,
                            actor: str = "api", cause: str = "mark_resume_pending") -> bool:
        """Mark the session interrupted and waiting to be resumed. False when nothing changed."""
        return self._routing.change_session(self._session_id(key_or_session), "mark_resume_pending",
                                           actor=actor, cause=cause, reason=reason)

    def clear_resume_pending(self, key_or_session: str | SessionSource, *, actor: str = "api",
                             cause: str = "clear_resume_pending") -> bool:
        """Clear the resume_pending marker. False when nothing changed."""
        return self._routing.change_session(self._session_id(key_or_session), "clear_resume_pending",
                                           actor=actor, cause=cause)

    def undo(self, key_or_session: str | SessionSource, turns: int = 1, *, actor: str = "api",
             cause: str = "undo") -> UndoResult:
        """Back up the last `turns` user turns of a session (its id, or a routing key for its
        current one), as /undo does: they leave the agent's history and stay in the log. `turns`
        clamps to the oldest user turn; the result's `turns` is 0 when there was nothing to undo.
        SessionBusy while a turn holds the session's lease."""
        return self._edits.undo(self._session_id(key_or_session), turns, actor=actor, cause=cause)

    # -- transcripts (the lower-level lease and delivery operations: the `turns` group) -----

    def transcript(self, session_id: str) -> list[dict[str, Any]]:
        """The session's messages in order, as the log holds them (always current): dicts of seq,
        role, content, tool_calls, tool_call_id, name, token_count, finish_reason,
        platform_message_id, timestamp, epoch, turn_id, actor and cause, and `fate`: None for a
        message in the agent's history, else "undone", "retried" or "compacted" (it stays in the log;
        `turns.agent_history` gives what the agent sees, `turns.transcript` the events themselves)."""
        return self._views.transcript(require_str("session_id", session_id))

    def session_version(self, session_id: str) -> int:
        """The version of the session's history as an agent is handed it, read from the log (so
        it sees every process's writes; 0 before the first message): the transcript's message
        count plus the history's edits (/undo, /retry, compaction), so it moves whenever a
        message is appended or the history edited, never for activity or routing alone. A warm
        agent built at one version is stale at another (AgentCache)."""
        session = self._ctx.session(require_str("session_id", session_id))  # reads only what is newer than this process's copy
        edits = len(session.history_edits) if session is not None else 0
        return self._app.stream_version(transcript_id(session_id)) + edits

    def on_session_change(self, listener: Callable[[str, str], object]) -> Callable[[], None]:
        """Call `listener(session_id, reason)` after each command of this Turnlog that ends or
        alters a session (/new, /reset, a rotation, a suspension, an undo, a retry, a compaction:
        the reason is the end reason, e.g. session_reset or compression, or "suspended",
        "undone", "retried", "compacted"); returns the function that stops it.
        Other processes' changes are not told: `session_version` shows them."""
        listeners = self._ctx.session_listeners
        listeners.append(listener)

        def stop() -> None:
            if listener in listeners:
                listeners.remove(listener)
        return stop

    def usage(self, session_id: str) -> list[dict[str, Any]]:
        """Model and token usage recorded with the session's messages (rich replies), by seq:
        dicts of seq, model, turn_id and the usage's counters."""
        return usage_of(self._app, self._leases.transcript(require_str("session_id", session_id)))

    # -- the gateway loop: inbound queue, turns, commands ---------------------------------

    def accept(self, source: SessionSource, text: str, *, kind: str = HUMAN, reply: str | None = None) -> Accepted:
        """Durably accept an inbound message (kind human, queued or wakeup) before processing it.

        A repeat (its message_id already accepted on this key, or the same text from the same sender
        within `EngineConfig.dedup_window_s`) is recorded as refused and never run: `duplicate` says why.
        `reply`: a reply already given to it (replaying traffic): the turn that runs it records that.
        """
        return self._inbound.accept(source, text, kind=kind, reply=reply)

    def run_next(self, source: SessionSource, responder: Responder, sender: Sender, *,
                 timeout: float | None = None) -> TurnOutcome | None:
        """Run the oldest waiting item of the source's key as one turn."""
        return self._runner.run_next(source, responder, sender, timeout=timeout)

    def handle_message(self, source: SessionSource, text: str, responder: Responder, sender: Sender, *,
                       timeout: float | None = None) -> list[TurnOutcome]:
        """accept() then run_next() until the key's queue is empty: the whole gateway step for one inbound message."""
        return self._runner.handle_message(source, text, responder, sender, timeout=timeout)

    def run_due_batches(self, responder: Responder, sender: Sender) -> list[TurnOutcome]:
        """With text batching on (EngineConfig.text_batching): run every key's burst whose debounce
        window is over. Call it on a timer; `next_batch_due()` says when the next one is ready."""
        outcomes = []
        for source in self.pending_inbound():
            outcomes += self._batches.run_due(source, responder, sender)
        return outcomes

    def next_batch_due(self) -> Any:
        """When the next held-back burst becomes ready to run (None when none waits)."""
        return self._batches.next_due(self.pending_inbound())

    def command(self, source: SessionSource, text: str) -> CommandResult:
        """Handle /new, /reset, /stop, /queue TEXT, /resume ID-OR-TITLE, /title [TEXT], /branch [NAME],
        /sessions, /usage, /status, /compress [FOCUS] or /compress here [N] [FOCUS] (with
        `EngineConfig.summariser`, else the fallback summary), /undo [N] or /retry. After /retry
        (`turn_pending`) the text waits as a queued item: run it with `run_next`."""
        return self._slash.handle(source, text)

    # -- background delegations (docs/behaviour.md §8a) -------------------------------------

    def start_delegation(self, source_or_session: SessionSource | str, handle: str | None = None, *,
                         description: str = "", actor: str = "api", cause: str = "api") -> str:
        """Record background work (a subagent, a long job) started from a session: the session a
        source's routing key points at, or the session named by id. Returns its handle (`handle`,
        or a new one). NotFound when there is no such session; InvalidRequest for an ended one or
        a handle already used."""
        return self._delegations.start(source_or_session, handle, description=description, actor=actor,
                                       cause=cause)

    def finish_delegation(self, handle: str, status: str = "succeeded", summary: str = "", *,
                          actor: str = "api", cause: str = "api") -> bool:
        """Record a delegation's finish (`status` succeeded, failed or cancelled) from any process
        on this log, with a wake-up on the inbox of the key it started on, in one transaction:
        whichever gateway next runs that key's queue (run_next, handle_message) runs it once, on
        the session that started it while that session still owns the key (else it is dropped:
        it never reopens a session /new closed). False, recording nothing, when the handle has
        finished already."""
        return self._delegations.finish(handle, status, summary, actor=actor, cause=cause)

    def delegations(self, session: str | SessionSource | None = None, state: str | None = None) -> list[DelegationRow]:
        """Background delegations, oldest first: one session's (an id, or a routing key's current
        session) or all; only those `running`, `stopped` or `finished` when `state` is given."""
        self.maintenance.catch_up()
        session_id = self._session_id(session) if session is not None else None
        return self._views.delegations(session_id, state)

    def queue(self, key: str | SessionSource) -> list[QueueItemRow]:
        """Items waiting (or running) for a routing key, oldest first."""
        self.maintenance.catch_up()
        return self._views.queue(self._route_ids(key))

    def queue_depths(self) -> list[QueueDepth]:
        """Per routing key with items waiting or running, how many of each, by key."""
        self.maintenance.catch_up()
        return self._views.queue_depths()

    def message_fates(self, source: SessionSource) -> list[MessageFate]:
        """What became of each message (with a message id) accepted on the source's routing key:
        the item it went into and that item's state, read from the log (the queue read model
        forgets items once they end)."""
        return message_fates(self._app, self._routing.routing_key(source).route_id)

    def ledger(self, status: str | None = None, *, limit: int | None = None) -> list[LedgerEntry]:
        """Every reply owed and how its delivery went, oldest first (only those in `status`, when
        given; at most `limit`, read no further)."""
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise InvalidRequest(f"bad limit {limit!r} (expected a whole number, 0 or more)")
        if status is not None and status not in DELIVERY_STATES:
            raise InvalidRequest(f"bad status {status!r} (expected one of {', '.join(DELIVERY_STATES)})")
        self.maintenance.catch_up()
        return [LedgerEntry.of(row, content) for row, content in self._views.ledger(status, limit)]

    def retry_deliveries(self, delivery_id: _uuid.UUID | None = None, *, dead: bool = False,
                         attempts: int | None = None, actor: str = "api", cause: str = "api") -> list[LedgerEntry]:
        """Owe a dead, failed or unknown reply again (`delivery_id`, or every dead one with
        `dead=True`), with `attempts` more attempts (default: the configured limit); the next
        sweep sends it. Each is a DeliveryRetried event with this actor and cause."""
        if (delivery_id is None) == (not dead):
            raise InvalidRequest("retry_deliveries needs one delivery_id or dead=True")
        if dead:
            self.maintenance.catch_up()
            ids = [_uuid.UUID(row.delivery_id) for row in self._views.dead_deliveries()]
        else:
            assert delivery_id is not None
            ids = [delivery_id]
        grant = attempts if attempts is not None else self._config.delivery_max_attempts
        for ident in ids:
            self._deliveries.retry(ident, attempts=grant, actor=actor, cause=cause)
        return self._ledger_entries(ids)

    def abandon_delivery(self, delivery_id: _uuid.UUID, reason: str, *, actor: str = "api",
                         cause: str = "api") -> LedgerEntry:
        """Give up on a reply for good (a DeliveryAbandoned event with the reason, actor and cause)."""
        self._deliveries.abandon(delivery_id, reason, actor=actor, cause=cause)
        return self._ledger_entries([delivery_id])[0]

    def _ledger_entries(self, ids: list[_uuid.UUID]) -> list[LedgerEntry]:
        self.maintenance.catch_up()
        wanted = tuple(str(i) for i in ids)
        return [LedgerEntry.of(row, content) for row, content in self._views.ledger(ids=wanted)] if wanted else []

    # -- gateway lifecycle and crash recovery ---------------------------------------------

    def start_gateway(self, name: str = "main") -> BootReport:
        """Record this boot (its id is this instance's owner) and recover what earlier boots left."""
        self._gateway_name = name
        return self._boots.start(name)

    def drain(self, reason: str = "restart", timeout_s: float = 0.0) -> bool:
        """Mark running turns resume_pending, wait up to timeout_s, stop; True if the stop was clean."""
        return self._boots.begin_drain(self._gateway(), reason, timeout_s)

    def stop_gateway(self) -> None:
        """A clean stop with nothing running (use drain() when turns may be running)."""
        self._boots.stop(self._gateway(), clean=True)

    def _gateway(self) -> str:
        if self._gateway_name is None:
            raise InvalidRequest("this Turnlog has not started a gateway (call start_gateway first)")
        return self._gateway_name

    def recover(self, name: str = "main", *, dry_run: bool = False) -> RecoveryReport:
        """Recover unclean boots of gateway `name` from outside it (an operator, `turnlog recover`)."""
        return self._recovery.recover(name, dry_run=dry_run, current_boot=None)

    def sweep_deliveries(self, send: SweepSender, *, platforms: set[str] | None = None,
                         accounts: set[str | None] | None = None, reconcile: Reconcile | None = None) -> SweepReport:
        """Deliver what earlier boots owed and settle sends of unknown outcome; `send(target, text)`
        is the platform send (checked up front: InvalidRequest for a sender that cannot take two
        arguments; target["idempotency_key"] is the delivery's, for platforms that take one).
        `reconcile(target, attempt)` answers whether an unknown send reached the chat (True,
        False, None: cannot tell); without it the platform's `unknown_send_policy` decides. Rows
        of other `platforms` or bot `accounts` (None: a row naming none), when given, are skipped."""
        require_sender(send, ("target", "text"), "sweep_deliveries")
        if reconcile is not None:
            require_sender(reconcile, ("target", "attempt"), "sweep_deliveries(reconcile=...)")
        return self._sweep.sweep(send, platforms=platforms, accounts=accounts, reconcile=reconcile)

    def resume_candidates(self, name: str | None = None) -> list[ResumePendingSession]:
        """Sessions to auto-resume now; none during a boot storm."""
        candidates = self._recovery.resume_candidates(name or self._gateway_name or "main")
        return [ResumePendingSession(**row) for row in candidates]

    def resume_interrupted(self, responder: Responder, sender: Sender, *, name: str | None = None,
                           platforms: set[str] | None = None,
                           accounts: set[str | None] | None = None) -> list[TurnOutcome]:
        """Auto-resume once every candidate of docs/behaviour.md §7.3 (none during a boot storm);
        only sessions started on `platforms` and naming one of the bot `accounts` (None: a
        session naming none), when given: the others are another gateway's or bot's to resume."""
        require_sender(sender, ("text",), "resume_interrupted")
        outcomes = []
        for row in self.resume_candidates(name):  # caught up by recovery
            if not self._started_on(row.session_id, platforms, accounts):
                continue
            in_flight = self._in_flight_item(row.session_id)
            outcome = self._runner.resume(session_id=row.session_id, session_key=row.session_key,
                                          reason=row.resume_reason, in_flight=in_flight, responder=responder,
                                          sender=sender)
            if outcome is not None:  # None: answered or settled meanwhile, nothing left to resume
                outcomes.append(outcome)
        return outcomes

    def _started_on(self, session_id: str, platforms: set[str] | None, accounts: set[str | None] | None) -> bool:
        if platforms is None and accounts is None:
            return True
        session = self._ctx.session(session_id)
        origin = (session.origin if session is not None else None) or {}
        return ((platforms is None or origin.get("platform") in platforms)
                and (accounts is None or origin.get("account_id") in accounts))

    def _in_flight_item(self, session_id: str) -> tuple[_uuid.UUID, Any] | None:
        ref = self._views.started_item(session_id)
        if ref is None:
            return None
        inbox_uuid = _uuid.UUID(ref.inbox_id)
        inbox = self._ctx.get(inbox_uuid, fresh=True)
        item = next((i for i in inbox.in_flight() if i.item_id == ref.item_id), None) if inbox else None
        return (inbox_uuid, item_with_text(self._ctx.app.events.get, item)) if item is not None else None

    def pending_inbound(self) -> list[SessionSource]:
        """One source per routing key that has messages waiting: what a gateway runs after a restart."""
        self.maintenance.catch_up()
        sources = []
        for inbox_text in self._views.inboxes_with_pending():
            inbox = self._ctx.get(_uuid.UUID(inbox_text), fresh=True)
            pending = inbox.pending() if inbox is not None else []
            if pending and pending[0].source:
                sources.append(SessionSource.from_dict(pending[0].source))
        return sources

    def status(self, name: str = "main") -> GatewayStatus:
        """Last boot and how it ended, active turns (and leases left expired by their holders), pending
        deliveries, resume_pending and suspended sessions."""
        self.maintenance.catch_up()
        return gateway_status(name, self._gateways.gateway(name), self._views, lease_time(self._clock))

    def gateways(self) -> list[str]:
        """The names of the gateways that ever booted on this log."""
        self.maintenance.catch_up()
        return [self._app.repository.get(UUID(stream)).name
                for stream in self._views.all_streams_of_kind("GatewayRegistered")]

    def boots(self, name: str = "main") -> list[BootSummary]:
        """The boots of gateway `name` that its record keeps, oldest first: the recent ones and
        any older one still to be recovered (none: never started)."""
        return boot_summaries(self._gateways.gateway(name))

    def metrics(self) -> Any:
        """A prometheus-client CollectorRegistry for a gateway to expose (the `metrics` extra):
        the log's counts, read from the read models at each scrape (the same in every process),
        and this process's turn latency, lease waits, takeovers and stale writes, measured from
        the first call on (labelled `process`: this Turnlog's owner). The same registry each call."""
        if self._registry is None:
            self._registry = metrics_registry(self._log_counts, self._recorder.enable_metrics)
        return self._registry

    def _log_counts(self) -> LogCounts:
        require_open(self, "a scrape of metrics()")  # the registry outlives the Turnlog
        self.maintenance.catch_up()
        head = self._projections.head()
        head_time = self._views.time_of(head) if head else None
        lag = []
        for p in self.maintenance.projection_status():
            # How long, in event time, the oldest event a read model has not applied has waited.
            oldest = self._views.time_of(p.position + 1) if p.behind else None
            lag.append(ProjectionLag(p.name, p.behind, _seconds_between(oldest, head_time)
                                     if oldest and head_time else 0.0))
        boots_alive = {name: sum(b.state in ("running", "draining") and not b.recovered for b in self.boots(name))
                       for name in self.gateways()}
        depths = self._views.queue_depths()
        inbox = {"pending": sum(d.pending for d in depths), "started": sum(d.started for d in depths)}
        return LogCounts.of(self._views.event_counts(), deliveries=self._views.delivery_state_counts(),
                            boots_alive=boots_alive, lag=lag, inbox=inbox)

    # -- reads (each catches the projections up first: read-your-writes) -------------------

    def routes(self) -> list[RouteRow]:
        """Every routing key and the session it points at, by key."""
        self.maintenance.catch_up()
        return self._views.routes()

    def sessions(self, *, title: str | None = None) -> list[SessionRow]:
        """Every session with its flags, in creation order; with `title`, only those whose title
        contains it (any case): the search by title."""
        self.maintenance.catch_up()
        return self._views.sessions(title)

    def title(self, key_or_session: str | SessionSource) -> str | None:
        """The session's title (None: it has none); a routing key names its current session."""
        return self._titles.title(self._session_id(key_or_session))

    def set_title(self, key_or_session: str | SessionSource, text: str | None, *, actor: str = "api",
                  cause: str = "api:title") -> str | None:
        """Title a session (SessionTitled; empty text clears it) and return the title as stored:
        control and invisible characters dropped, whitespace collapsed. InvalidRequest when it
        is over 100 characters or another session holds it (a title names one session)."""
        return self._titles.set_title(self._session_id(key_or_session), text, actor=actor, cause=cause)

    def session(self, key_or_session: str | SessionSource) -> SessionRow:
        """A session's row: its flags, times and lineage. Given a routing key (a key string, a
        route id or a SessionSource), the key's current session; NotFound when there is none."""
        session_id = self._session_id(key_or_session)  # caught up
        row = self._views.session(session_id)
        if row is None:
            raise NotFound(f"no session {session_id!r}")
        return row

    def history(self, key_or_session: str | SessionSource, *, since: str | int | None = None,
                until: str | int | None = None, types: Iterable[str] | None = None) -> list[HistoryEntry]:
        """The audit timeline of a key or a session: every event with time, actor, cause and a summary.

        since/until are ISO times or log positions `#N` (inclusive); types are event names.
        """
        names = [types] if isinstance(types, str) else list(types or [])
        unknown = unknown_event_names(names)
        if unknown:
            raise InvalidRequest(f"no event is named {quoted(unknown[0])}: event names are like RouteBound,"
                                 " SessionEnded or MessageAppended (their list: docs/architecture.md, 'The events')")
        self.maintenance.catch_up()
        window = {"since": parse_moment(self._views, since, after=True) if since is not None else None,
                  "until": parse_moment(self._views, until) if until is not None else None}
        if isinstance(key_or_session, str) and self._is_session(key_or_session):
            rows = self._views.history(session=key_or_session, types=names, **window)
        else:
            rows = self._views.history(route_ids=self._route_ids(key_or_session), types=names, **window)
        return [HistoryEntry(**r, summary=summarize(r["event"], r["data"])) for r in rows]

    # -- audit and time travel -------------------------------------------------------------

    def events_around(self, position: int, *, before: int = 8, after: int = 8) -> list[LogEvent]:
        """The log's events at positions `position - before` .. `position + after`, each with its
        time, name, actor, cause, session and a summary."""
        self.maintenance.catch_up()
        return log_window.events_around(self._projections, position, before, after)

    def turn_spans(self) -> list[TurnSpan]:
        """Every finished turn in the log: when its lease was taken and how long it was held."""
        upto = self.maintenance.log_head()
        return log_window.turn_spans(self._projections, upto)

    def at(self, when: str | int) -> AsOf:
        """The gateway as of a log position `#N` (or an int) or an ISO time."""
        self.maintenance.catch_up()
        moment = AsOf(self._views, self._app, parse_moment(self._views, when))
        tie(moment, self)  # its reads need this Turnlog's store: closed with it
        return moment

    def diff(self, a: str | int, b: str | int, *, key: str | None = None,
             max_events: int | None = None) -> dict[str, Any]:
        """What changed between two moments, grouped by routing key and by session (only `key`'s,
        reading only its events). `max_events`: refuse (TooLarge) a diff that would read more."""
        self.maintenance.catch_up()
        return diff_moments(self._views, self._app, parse_moment(self._views, a), parse_moment(self._views, b),
                            key=key, max_events=max_events)

    def export(self, key_or_session: str | SessionSource, *, lineage: bool = False) -> dict[str, Any]:
        """Hermes-compatible export of a session (docs/behaviour.md §10), or of its whole compression lineage."""
        self.maintenance.catch_up()
        session_id = self._session_id(key_or_session)
        return export_lineage(self._views, session_id) if lineage else export_session(self._views, session_id)

    def compact(self, key_or_session: str | SessionSource, *, keep_turns: int = 0, focus: str | None = None,
                summary: str | list[dict[str, Any]] | None = None, actor: str = "api") -> Compaction:
        """Compact a session's history in place (its id, or a routing key for its current one): a
        summary stands for all of it but the last `keep_turns` user turns, from `summary` (text or
        messages: the operator's own) or else `EngineConfig.summariser` (else the fallback
        summary). Refused (LeaseTimeout) while a turn runs; CompactionFailed when there is nothing
        to compact or the summariser fails, and then nothing is recorded."""
        session_id = self._session_id(key_or_session)
        owner_key = self.session(session_id).session_key
        return self._compaction.compact(session_id, owner_key, keep_turns=keep_turns, focus=focus, summary=summary,
                                        actor=actor, cause="compact")

    def fork(self, session_id: str, at: str | int, *, to_key: str | SessionSource | None = None,
             actor: str = "api") -> str:
        """A new session whose transcript is `session_id`'s up to moment `at`; returns its id."""
        self.maintenance.catch_up()
        if not self._is_session(require_str("session_id", session_id)):
            raise NotFound(f"no session {session_id!r}")
        position = parse_moment(self._views, at)
        moment = AsOf(self._views, self._app, position)
        if moment.session(session_id) is None:
            raise InvalidRequest(f"session {session_id} did not exist yet at #{position}: fork at or after its creation")
        upto = moment.version(str(transcript_id(session_id))) or 0
        route_id = self._route_id(to_key) if to_key is not None else None
        return self._forks.fork(session_id, upto, at_position=position, route_id=route_id, actor=actor)

    def import_hermes(self, hermes_home: str | os.PathLike[str], *, profile: str | None = None,
                      dry_run: bool = False, progress: Callable[[int, int], None] | None = None,
                      batch_messages: int = BATCH_MESSAGES, force: bool = False) -> ImportReport:
        """Import a Hermes home's sessions, transcripts and routing (idempotent; see turnlog.hermes).

        `progress(done, total)` is called after each batch (one transaction of about
        `batch_messages` messages). `force` imports a home whose schema version is unknown."""
        def known() -> dict[str, str]:
            self.maintenance.catch_up()  # a killed earlier run's sessions count as imported
            return {r.session_id: r.created_reason for r in self._views.sessions()}
        importer = HermesImporter(self._ctx, self._titles, known)
        return importer.run(os.fspath(hermes_home), profile=profile, dry_run=dry_run,
                            progress=progress, batch_messages=batch_messages, force=force)

    def export_hermes(self, out_home: str | os.PathLike[str], *, force: bool = False) -> ExportReport:
        """Write this log's sessions, transcripts and routing as a Hermes 0.19.0 home (`force`:
        replace the files of an existing one)."""
        self.maintenance.catch_up()
        recorded = self._ctx.recorded_key_settings()
        return export_home(os.fspath(out_home), views=self._views, routing_map=self.export_routing,
                           clock=self._clock, force=force, key_settings=recorded.new if recorded else None)

    def export_routing(self) -> dict[str, Any]:
        """The routing map as Hermes' sessions.json: session_key -> entry (docs/behaviour.md §3.1)."""
        sessions = {s.session_id: s.to_dict() for s in self.sessions()}  # caught up
        return routing_map([r.to_dict() for r in self.routes()], sessions)

    # -- encryption at rest, erase, backup, archive, copy (data_lifecycle.py) ----------------

    @property
    def key_fingerprint(self) -> str | None:
        """The fingerprint of the master key this database needs (never the key); None when it is
        not encrypted."""
        return self._data.key_fingerprint

    def encrypt(self) -> EncryptionReport:
        """Encrypt from now on an existing unencrypted database: the events written from here are
        sealed; those before stay as stored (the hash chain covers their bytes), and erase cannot
        reach them (docs/operations.md). The master key is `master_key`, TURNLOG_MASTER_KEY, or a
        new key file beside the database."""
        return self._data.encrypt()

    def rotate_master_key(self, new_key: bytes | None = None) -> EncryptionReport:
        """Re-wrap every data key under a new master key, rewriting no event. `new_key`: the new
        32 bytes; None: made here and written to the key file (only when the key came from it)."""
        return self._data.rotate_master_key(new_key)

    def erase_subject(self, subject: str, *, actor: str, cause: str, dry_run: bool = False,
                      progress: Callable[[int, int], None] | None = None) -> EraseReport:
        """Forget a subject (`PLATFORM:USER_ID`): suspend its sessions (its next message starts a new
        one), destroy its data keys, record SubjectErased (its keyed hash, never the id; other
        processes refill their read models when they read it),
        drop the snapshots and rebuild every read model, then zero the freed pages and checkpoint
        the write-ahead log. Every reader then shows "[erased]" for its words and ids.
        `dry_run`: only what would be done; `progress(done, total)`: the rebuild's. docs/operations.md
        says what erase does not reach."""
        return self._data.erase_subject(subject, actor=actor, cause=cause, dry_run=dry_run, progress=progress)

    def backup(self, out: str | os.PathLike[str], *, progress: Callable[[int, int], None] | None = None
               ) -> BackupReport:
        """Copy this SQLite database to the new file `out` while gateways go on writing (one read
        transaction: the copy is the log as of one commit), verify the copy (SQLite's check and
        the hash chain recomputed) and return its sha256, event count and head position. A
        PostgreSQL log is backed up with pg_dump (docs/operations.md). `progress(done, total)`
        is called after each step."""
        return self._data.backup(out, progress=progress)

    def archivable(self, *, older_than: str | timedelta | None = None,
                   idle_for: str | timedelta | None = None) -> list[ArchiveCandidate]:
        """The sessions an archive run would take now (a dry run: nothing changes): done with
        (ended, suspended, superseded) more than `older_than` ago, or idle more than `idle_for`
        ("90d", "12h", "1y" or a timedelta); neither given: `EngineConfig.retention`'s rules.
        Never a session that owns a key, holds a lease or owes a delivery (domain/retention.py)."""
        return self._data.archivable(older_than, idle_for)

    def archive(self, out: str | os.PathLike[str], *, older_than: str | timedelta | None = None,
                idle_for: str | timedelta | None = None, dry_run: bool = False, actor: str = "api",
                cause: str = "api:archive", progress: Callable[[int, int], None] | None = None) -> ArchiveReport:
        """Move the sessions `archivable` picks to the new archive file `out` (docs/archive.md):
        written, fsynced and read back first, then in one transaction SessionsArchived is
        recorded and their events leave the log (their chain seals stay: `verify --chain`
        passes); the read models refill and the file's free pages are given back (incremental
        vacuum; an older database: `compact_file`). `dry_run`: only say what would go.
        `progress(done, total)` after each step. SQLite logs only."""
        return self._data.archive(out, older_than=older_than, idle_for=idle_for, dry_run=dry_run, actor=actor,
                                  cause=cause, progress=progress)

    def restore_archive(self, path: str | os.PathLike[str], *, actor: str = "api", cause: str = "api:restore-archive",
                        progress: Callable[[int, int], None] | None = None) -> ArchiveRestoreReport:
        """Bring an archive's sessions back into the log (SessionsRestored), each event at its
        old position and checked against the seal the chain kept, so transcripts, history and
        search are as before. The file's sha256 must be one this log archived; a second restore
        of it does nothing (`already_restored`). `progress(done, total)` after each step (read and
        checked, written, read models refilled)."""
        return self._data.restore_archive(path, actor=actor, cause=cause, progress=progress)

    def copy_to(self, location: str | os.PathLike[str], *, views: str | None = None, batch: int | None = None,
                progress: Callable[[int, int], None] | None = None) -> CopyReport:
        """Copy the whole log, in order, with its positions and hash chain, to another store (an
        SQLite path or a postgresql:// URL, with its read-model file `views`), then compare the
        two logs event by event, verify the target's chain and rebuild its read models. Killed
        midway, a second call goes on from the target's head. Events written here after the copy
        began are left for the next call (stop the gateways first). `batch` events are written per
        transaction (default 2000); `progress(done, total)` is called after each. An encrypted
        log's key tables go with it (the same master key opens the copy; a key file is written
        beside an SQLite copy when the source has one; a PostgreSQL copy needs TURNLOG_MASTER_KEY)."""
        return self._data.copy_to(location, views=views, batch=batch, progress=progress)

    # -- search ---------------------------------------------------------------------------

    def search(self, query: str, *, session: str | None = None, key: str | None = None,
               platform: str | None = None, role: str | None = None, since: Any = None, until: Any = None,
               limit: int = 20, include_undone: bool = False) -> list[SearchHit]:
        """Full-text search of every transcript (docs/behaviour.md §10), best match first.

        Messages undone or retried out of the agent's history are left out unless
        `include_undone`; compacted ones are found. Each hit's `fate` says which it is.

        Words are ranked by bm25 with a highlighted snippet; Chinese, Japanese and Korean text is
        found by substring. `since` (inclusive) and `until` (exclusive) are ISO times with a zone
        or dates (midnight UTC). Raises InvalidRequest for a query over 2048 characters.
        """
        self.maintenance.catch_up(["search"])
        return self._views.search(query, session=session, key=key, platform=platform,
                                role=role, since=since, until=until, limit=limit, include_undone=include_undone)

    # -- resolving what the caller named ---------------------------------------------------

    def routing_key(self, source: SessionSource) -> str:
        """The session key string of a source (the key rule of domain/keys.py)."""
        return self._routing.routing_key(source).key

    def route_id(self, source: SessionSource) -> str:
        """The route id of a source's routing key: one route's name even where key strings of ids
        holding ':' collide (every read that takes a key takes it too)."""
        return str(self._routing.routing_key(source).route_id)

    # Names are resolved through the read models, caught up first (writable opens).

    def _is_session(self, text: str) -> bool:
        self.maintenance.catch_up()
        return self._views.session_exists(text)

    def _route_ids(self, key: str | SessionSource) -> list[str]:
        self.maintenance.catch_up()
        if isinstance(key, SessionSource):
            return [str(self._routing.routing_key(key).route_id)]
        _require_key_or_session(key)
        # A route id names one route; a key string may name several (ids holding ':' collide).
        route_ids = self._views.route_ids_of_key(key)
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
        _require_key_or_session(key_or_session)
        if isinstance(key_or_session, str) and self._is_session(key_or_session):
            return key_or_session
        route_id = self._route_id(key_or_session)
        session_id = self._views.current_session(str(route_id))
        if session_id is None:
            raise NotFound(f"routing key {key_or_session!r} has no current session")
        return session_id


class CountedTurns(RunningTurns):
    """The engine's running turns, counted for the process's garbage collections (gc_turns.py)."""

    def __init__(self, engine: EngineTurns) -> None:
        super().__init__()
        self.engine = engine

    def add(self, turn: Any) -> None:
        self.engine.began(turn)
        try:
            super().add(turn)
        except BaseException:
            self.engine.ended(turn)
            raise

    def discard(self, turn: Any) -> None:
        super().discard(turn)
        self.engine.ended(turn)

    def close(self, wait_s: float) -> list[Any]:
        left = super().close(wait_s)
        self.engine.engine_closed()
        return left


def _require_key_or_session(value: Any) -> None:
    if not isinstance(value, (str, SessionSource)):
        raise InvalidRequest(f"a session must be a session id, a routing key, a route id or a SessionSource,"
                             f" not {type(value).__name__}")


def _seconds_between(earlier: str, later: str) -> float:
    return max((datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds(), 0.0)


def _read_only_chain(app: Any, projections: ProjectionRunner) -> ChainSealer | None:
    """The hash chain as sealed so far, or None when this file has none (sealing would write)."""
    try:
        return ChainSealer(app, projections.db)
    except sqlite3.DatabaseError:
        return None


def open(location: str | os.PathLike[str] = DEFAULT_DB, **options: Any) -> Turnlog:  # noqa: A001
    return Turnlog(location, **options)


def compact_file(db: str | os.PathLike[str]) -> Reclaimed:
    """Rewrite the SQLite database `db` into a new file without its free pages (VACUUM INTO, then
    one rename), turning incremental vacuum on so that later archives give space back by
    themselves; checked first, and refused while another process has it open (DatabaseInUse).
    For a database made before incremental vacuum (offline: stop the gateways)."""
    return reclaim.compact_offline(os.fspath(db))


def restore(backup: str | os.PathLike[str], db: str | os.PathLike[str], *, force: bool = False,
            progress: Callable[[int, int], None] | None = None, master_key: MasterKey = None,
            key_file: str | os.PathLike[str] | None = None) -> RestoreReport:
    """Put the backup file `backup` (made by `Turnlog.backup`) in place of the SQLite database
    `db`: the backup is verified first (SQLite's check and its hash chain), then renamed into
    place in one step. A database already at `db` is replaced only with `force`, and never while
    another process has it open (DatabaseInUse). The backup of an encrypted database names its
    master key's fingerprint; it is restored only with that key at hand (`master_key`,
    TURNLOG_MASTER_KEY, the key file `<db>.key`, or `key_file`, which is then copied beside the
    restored database as `<db>.key`), else EncryptionKeyMissing and nothing changes."""
    return backups.restore(os.fspath(backup), os.fspath(db), force=force, progress=progress, master_key=master_key,
                           key_file_path=os.fspath(key_file) if key_file is not None else None)


def check_hermes_home(hermes_home: str | os.PathLike[str], *, profile: str | None = None, force: bool = False) -> None:
    """Refuse a Hermes home that `Turnlog.import_hermes` would refuse (InvalidRequest: not a home;
    HermesHomeError: its state.db unreadable, not Hermes', linked out of the home, or of a schema
    version not known unless `force`), without reading its sessions or opening any database."""
    check_home(os.fspath(hermes_home), profile, force=force)


# What still answers once closed: close itself, the key rule's answers and what is kept in memory
# (no store involved).
_WITHOUT_THE_STORE = {"close", "routing_key", "route_id", "owner", "read_only", "stale", "key_fingerprint"}

refuse_after_close(Turnlog, "", still_open=_WITHOUT_THE_STORE)
setattr(Turnlog, "__init__", saying_damage(Turnlog.__init__))  # catching up at the open reads too
refuse_after_close(TurnOperations, "turns")
refuse_after_close(Maintenance, "maintenance", still_open={"stale"})
refuse_after_close(AsOf, "AsOf")
