"""turnlog: an event-sourced session engine for multi-platform agent gateways.

`Turnlog` (or `turnlog.open(...)`) is the engine; its `turns` group holds the lower-level lease,
transcript and delivery operations and its `maintenance` group the upkeep of the read models and
the hash chain. The other names are what its methods take and return, and the errors they raise
(`turnlog.errors` draws their tree). `__all__` is every public name, sorted (a test pins it).
"""

from .agent_cache import AgentCache, CacheStats
from .api import DEFAULT_DB, HistoryEntry, Turnlog, check_hermes_home, compact_file, restore
from .commands.archive import ArchiveCandidate, ArchiveReport, ArchiveRestoreReport
from .api import open as open  # turnlog.open(...); kept out of __all__ so `import *` never hides the builtin
from .clock import Clock, ManualClock, SequentialIds, SystemClock
from .commands.delivery import Attempt
from .commands.inbound import Accepted
from .commands.keeper import CancelToken, RunningTurn, current_turn
from .commands.boots import BootReport
from .commands.recovery import RecoveryReport
from .commands.rekey import RekeyReport
from .commands.sweep import SweepReport
from .commands.routing import RouteResult
from .commands.lease import LeaseToken, MessageRecord
from .commands.history_edits import UndoResult
from .commands.message_fates import MessageFate
from .commands.slash import COMMANDS as SLASH_COMMANDS, CommandResult, parse_command
from .commands.turn import TurnOutcome
from .commands.compaction import Compaction
from .config import EngineConfig, Retention, Summariser, TextBatching
from .domain.context_prompt import build_session_context
from .domain.key_settings import KeySettings
from .domain.keys import RoutingKey, build_session_key, is_shared_multi_user_session, resolve_routing_key
from .domain.policy import ResetPolicies, ResetPolicy
from .domain.rekey import RekeyKept, RekeyMove
from .domain.reply import ReplyMessage, Usage
from .domain.source import CONTROL_CHARACTERS, ChatType, Platform, SessionSource
from .domain.transcript import MessageAppended
from .errors import (AmbiguousKey, ChainBroken, CompactionFailed, ConflictError, DamagedDatabase, DatabaseInUse, EncryptionKeyMissing, GatewayStillRunning, HermesHomeError,
                     InvalidRequest, InvalidSetting, KeySettingsIgnored, LeaseTimeout, NotFound, ProjectionCorrupt, QueueFull, ReadOnlyDatabase, SendOutcomeUnknown, SessionBusy,
                     SessionOwnedElsewhere, StaleLease, StoreError, TooLarge, TurnCancelled, TurnlogClosed, TurnlogError,
                     UnreadableEvent)
from .export import FORMATS as EXPORT_FORMATS, render as render_export
from .gateway_status import BootSummary, GatewayStatus, ResumePendingSession, SuspendedSession
from .hermes.exporter import ExportReport
from .hermes.importer import ImportReport
from .maintenance import Maintenance, ProjectionPosition
from .projections.base import TypedRow
from .storage.reclaim import Reclaimed
from .projections.routing_views import RouteRow, SessionRow
from .projections.search_hit import SearchHit
from .projections.leases_views import LeaseRow
from .projections.ledger_views import LedgerEntry, OwedDelivery
from .projections.log_window import LogEvent, TurnSpan
from .projections.delegations_views import DelegationRow
from .projections.queue_views import QueueDepth, QueueItemRow
from .storage.backup import BackupReport, RestoreReport
from .storage.chain import ChainBreak, ChainReport
from .storage.log_copy import CopyReport
from .storage.local_file import LocalFile, local_file
from .timetravel import AsOf
from .turn_operations import LeaseHolder, TurnOperations

__all__ = [
    "Accepted",
    "AgentCache",
    "AmbiguousKey",
    "ArchiveCandidate",
    "ArchiveReport",
    "ArchiveRestoreReport",
    "AsOf",
    "Attempt",
    "BackupReport",
    "BootReport",
    "BootSummary",
    "build_session_context",
    "build_session_key",
    "CacheStats",
    "CancelToken",
    "ChainBreak",
    "ChainBroken",
    "ChainReport",
    "ChatType",
    "check_hermes_home",
    "Clock",
    "CommandResult",
    "compact_file",
    "Compaction",
    "CompactionFailed",
    "ConflictError",
    "CONTROL_CHARACTERS",
    "CopyReport",
    "current_turn",
    "DamagedDatabase",
    "DatabaseInUse",
    "DEFAULT_DB",
    "DelegationRow",
    "EncryptionKeyMissing",
    "EngineConfig",
    "EXPORT_FORMATS",
    "ExportReport",
    "GatewayStatus",
    "GatewayStillRunning",
    "HermesHomeError",
    "HistoryEntry",
    "ImportReport",
    "InvalidRequest",
    "InvalidSetting",
    "is_shared_multi_user_session",
    "KeySettings",
    "KeySettingsIgnored",
    "LeaseHolder",
    "LeaseRow",
    "LeaseTimeout",
    "LeaseToken",
    "LedgerEntry",
    "local_file",
    "LocalFile",
    "LogEvent",
    "Maintenance",
    "ManualClock",
    "MessageAppended",
    "MessageFate",
    "MessageRecord",
    "NotFound",
    "OwedDelivery",
    "parse_command",
    "Platform",
    "ProjectionCorrupt",
    "ProjectionPosition",
    "QueueDepth",
    "QueueFull",
    "QueueItemRow",
    "ReadOnlyDatabase",
    "Reclaimed",
    "RecoveryReport",
    "RekeyKept",
    "RekeyMove",
    "RekeyReport",
    "render_export",
    "ReplyMessage",
    "ResetPolicies",
    "ResetPolicy",
    "resolve_routing_key",
    "restore",
    "RestoreReport",
    "ResumePendingSession",
    "Retention",
    "RouteResult",
    "RouteRow",
    "RoutingKey",
    "RunningTurn",
    "SearchHit",
    "SendOutcomeUnknown",
    "SequentialIds",
    "SessionBusy",
    "SessionOwnedElsewhere",
    "SessionRow",
    "SessionSource",
    "SLASH_COMMANDS",
    "StaleLease",
    "StoreError",
    "Summariser",
    "SuspendedSession",
    "SweepReport",
    "SystemClock",
    "TextBatching",
    "TooLarge",
    "TurnCancelled",
    "Turnlog",
    "TurnlogClosed",
    "TurnlogError",
    "TurnOperations",
    "TurnOutcome",
    "TurnSpan",
    "TypedRow",
    "UndoResult",
    "UnreadableEvent",
    "Usage",
]
