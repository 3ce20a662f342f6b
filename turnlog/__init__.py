"""turnlog: an event-sourced session engine for multi-platform agent gateways."""

from .api import DEFAULT_DB, HistoryEntry, Turnlog
from .api import open as open  # turnlog.open(...); kept out of __all__ so `import *` never hides the builtin
from .clock import Clock, ManualClock, SequentialIds, SystemClock
from .commands.keeper import CancelToken, RunningTurn, current_turn
from .commands.routing import RouteResult
from .commands.slash import COMMANDS as SLASH_COMMANDS, parse_command
from .config import EngineConfig, TextBatching
from .domain.context_prompt import build_session_context
from .domain.keys import RoutingKey, build_session_key, is_shared_multi_user_session, resolve_routing_key
from .domain.policy import ResetPolicies, ResetPolicy
from .domain.reply import ReplyMessage, Usage
from .domain.source import ChatType, Platform, SessionSource
from .errors import (ConflictError, GatewayStillRunning, InvalidRequest, LeaseTimeout, NotFound, StaleLease,
                     StoreError, TurnCancelled, TurnlogClosed, TurnlogError)
from .errors import SessionOwnedElsewhere

__all__ = [
    "DEFAULT_DB", "HistoryEntry", "Turnlog", "Clock", "ManualClock", "SequentialIds", "SystemClock",
    "RouteResult", "EngineConfig", "TextBatching", "build_session_context", "RoutingKey", "build_session_key",
    "is_shared_multi_user_session",
    "resolve_routing_key", "ResetPolicies", "ResetPolicy", "ChatType", "Platform", "SessionSource",
    "ConflictError", "GatewayStillRunning", "InvalidRequest", "LeaseTimeout", "NotFound", "StaleLease", "StoreError",
    "TurnlogError",
    "SessionOwnedElsewhere",
    "CancelToken", "RunningTurn", "current_turn", "ReplyMessage", "Usage", "TurnCancelled",
    "SLASH_COMMANDS", "parse_command",
    "TurnlogClosed",
]
