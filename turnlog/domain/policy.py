"""Reset policy: when a routed message must leave its current session for a new one.

Pure rules. Every instant is passed in and must be timezone-aware; all arithmetic is
done in UTC so that a DST change or a host time-zone change cannot shift a decision.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from enum import Enum
from types import MappingProxyType
from typing import Protocol, TypeAlias
from zoneinfo import ZoneInfo

RESET_MODES = frozenset({"none", "idle", "daily", "both"})

# Reasons a session row is ended with.
END_REASONS = frozenset(
    {
        "idle",
        "daily",
        "suspended",
        "resume_pending_expired",
        "session_reset",
        "session_switch",
        "compression",
    }
)
# End reasons only other gateways write (Hermes 0.19.0's CLI, TUI, cron, branches, web sockets):
# imported sessions keep them.
FOREIGN_END_REASONS = frozenset(
    {
        "orphaned_compression", "new_session", "cli_close", "tui_close", "tui_shutdown", "resumed_other",
        "branched", "cron_complete", "agent_close", "ws_orphan_reap", "ws_disconnect", "idle_timeout",
        "lru_evict",
    }
)

# The subset of END_REASONS that the engine decides on its own while routing.
AUTO_RESET_REASONS = frozenset({"idle", "daily", "suspended", "resume_pending_expired"})

DEFAULT_FRESHNESS_WINDOW_S = 3600.0

# What the background-process registry reports for a session: either a plain
# "something is running" flag or the start times of the processes it holds.
BackgroundCheck: TypeAlias = Callable[[], bool | Iterable[datetime]]


@dataclass(frozen=True)
class ResetPolicy:
    """When sessions of one platform or chat type end by themselves, and who is told."""

    mode: str = "none"
    idle_minutes: int = 1440
    at_hour: int = 4
    timezone: str = "UTC"
    notify: bool = True
    notify_exclude_platforms: tuple[str, ...] = ("api_server", "webhook")
    bg_process_max_age_hours: float = 24

    def __post_init__(self) -> None:
        if self.mode not in RESET_MODES:
            raise ValueError(
                f"mode must be one of {sorted(RESET_MODES)}, got {self.mode!r}"
            )
        if not _is_int(self.idle_minutes) or self.idle_minutes <= 0:
            raise ValueError(
                f"idle_minutes must be a positive integer, got {self.idle_minutes!r}"
            )
        if not _is_int(self.at_hour) or not 0 <= self.at_hour <= 23:
            raise ValueError(f"at_hour must be an integer 0-23, got {self.at_hour!r}")
        _zone_named(self.timezone)
        if not isinstance(self.notify, bool):
            raise ValueError(f"notify must be a bool, got {self.notify!r}")
        if isinstance(self.notify_exclude_platforms, str):
            raise ValueError(
                "notify_exclude_platforms must be a collection of platform names, "
                f"got the string {self.notify_exclude_platforms!r}"
            )
        # Config files hand over lists; keep the frozen policy hashable.
        excluded = tuple(_name_of(p) for p in self.notify_exclude_platforms)
        object.__setattr__(self, "notify_exclude_platforms", excluded)
        if not _is_number(self.bg_process_max_age_hours) or math.isnan(
            self.bg_process_max_age_hours
        ):
            raise ValueError(
                "bg_process_max_age_hours must be a number, "
                f"got {self.bg_process_max_age_hours!r}"
            )

    @property
    def zone(self) -> ZoneInfo:
        return _zone_named(self.timezone)

    def notifies_on(self, platform: str | Enum | None) -> bool:
        return self.notify and _name_of(platform) not in self.notify_exclude_platforms


@dataclass(frozen=True)
class ResetPolicies:
    """The default policy plus per-platform and per-chat-type overrides."""

    default: ResetPolicy = field(default_factory=ResetPolicy)
    by_platform: Mapping[str, ResetPolicy] = field(default_factory=dict, hash=False)
    by_chat_type: Mapping[str, ResetPolicy] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.default, ResetPolicy):
            raise ValueError(f"default must be a ResetPolicy, got {self.default!r}")
        for name in ("by_platform", "by_chat_type"):
            table = {
                _name_of(key): policy for key, policy in getattr(self, name).items()
            }
            for key, policy in table.items():
                if not isinstance(policy, ResetPolicy):
                    raise ValueError(
                        f"{name}[{key!r}] must be a ResetPolicy, got {policy!r}"
                    )
            object.__setattr__(self, name, MappingProxyType(table))

    def for_source(self, platform: str | Enum | None, chat_type: str | Enum | None) -> ResetPolicy:
        """Platform override, else chat-type override, else the default."""
        by_platform = self.by_platform.get(_name_of(platform))
        if by_platform is not None:
            return by_platform
        by_chat_type = self.by_chat_type.get(_name_of(chat_type))
        if by_chat_type is not None:
            return by_chat_type
        return self.default


class SessionFlags(Protocol):
    """The parts of a routed session that decide whether it is kept."""

    @property
    def suspended(self) -> bool: ...

    @property
    def resume_pending(self) -> bool: ...

    @property
    def resume_marked_at(self) -> datetime | None: ...

    @property
    def last_activity(self) -> datetime: ...


def reset_reason(
    policy: ResetPolicy,
    *,
    last_activity: datetime,
    now: datetime,
    background: BackgroundCheck | None = None,
) -> str | None:
    """Why the policy ends a session last active at `last_activity`, or None to keep it."""
    last_activity = _utc("last_activity", last_activity)
    now = _utc("now", now)

    reason = _timer_reason(policy, last_activity=last_activity, now=now)
    # The registry is only asked when a timer fired: the answer would not matter otherwise.
    if reason is not None and _background_active(
        background, now=now, max_age_hours=policy.bg_process_max_age_hours
    ):
        return None
    return reason


def route_decision(
    state: SessionFlags,
    *,
    now: datetime,
    policy: ResetPolicy,
    freshness_window_s: float = DEFAULT_FRESHNESS_WINDOW_S,
    background: BackgroundCheck | None = None,
) -> str | None:
    """Why a routed message needs a new session instead of `state`'s, or None to keep it."""
    now = _utc("now", now)
    last_activity = _utc("state.last_activity", state.last_activity)
    marked_at = (
        None
        if state.resume_marked_at is None
        else _utc("state.resume_marked_at", state.resume_marked_at)
    )
    if not _is_number(freshness_window_s) or math.isnan(freshness_window_s):
        raise ValueError(
            f"freshness_window_s must be a number, got {freshness_window_s!r}"
        )

    if state.suspended:
        return "suspended"

    reason = reset_reason(
        policy, last_activity=last_activity, now=now, background=background
    )
    if reason is not None or not state.resume_pending:
        return reason

    # A user who turned resets off must never lose an interrupted turn to a timer.
    if policy.mode == "none" or freshness_window_s <= 0:
        return None
    marker_age = now - (last_activity if marked_at is None else marked_at)
    if marker_age > timedelta(seconds=freshness_window_s):
        return "resume_pending_expired"
    return None


def reset_notice(
    reason: str, *, policy: ResetPolicy, platform: str | Enum | None, had_activity: bool
) -> str | None:
    """The message telling a user their session was reset automatically, or None for no message."""
    if reason not in AUTO_RESET_REASONS:
        raise ValueError(
            f"reason must be one of {sorted(AUTO_RESET_REASONS)}, got {reason!r}"
        )
    # The user cannot have caused these two, so they always hear about them.
    always_told = reason in ("suspended", "resume_pending_expired")
    if not always_told and not (had_activity and policy.notifies_on(platform)):
        return None
    why = {
        "idle": f"inactive for {_duration(policy.idle_minutes)}",
        "daily": f"daily schedule at {policy.at_hour}:00 ({policy.timezone})",
        "suspended": "the session was suspended",
        "resume_pending_expired": "the interrupted session expired",
    }[reason]
    return (
        f"Session reset automatically: {why}. A new conversation has started; "
        "send /resume to go back to the previous one."
    )


def explicit_reset_notice(platform: str | Enum | None, policy: ResetPolicy) -> str | None:
    """The reply to /new or /reset, or None where the policy keeps the platform quiet."""
    if not policy.notifies_on(platform):
        return None
    return (
        "Session reset. Your next message starts a new conversation; "
        "send /resume to go back to the previous one."
    )


def _timer_reason(
    policy: ResetPolicy, *, last_activity: datetime, now: datetime
) -> str | None:
    if policy.mode in ("idle", "both"):
        if now > last_activity + timedelta(minutes=policy.idle_minutes):
            return "idle"
    if policy.mode in ("daily", "both"):
        if last_activity < _daily_boundary(policy, now):
            return "daily"
    return None


def _daily_boundary(policy: ResetPolicy, now: datetime) -> datetime:
    """The most recent at_hour:00 wall-clock time in the policy's zone, as UTC."""
    local_now = now.astimezone(policy.zone)
    day: date = local_now.date()
    if local_now.hour < policy.at_hour:
        day -= timedelta(days=1)
    boundary = datetime.combine(day, time(policy.at_hour), tzinfo=policy.zone)
    return boundary.astimezone(UTC)


def _background_active(
    background: BackgroundCheck | None, *, now: datetime, max_age_hours: float
) -> bool:
    if background is None:
        return False
    max_age = timedelta(hours=max_age_hours) if max_age_hours > 0 else None
    try:
        found = background()
        if isinstance(found, bool):
            return found
        for started in found:
            age = now - _utc("background process start", started)
            # A forgotten long-lived process must not pin the session forever.
            if max_age is None or age <= max_age:
                return True
        return False
    except Exception:
        # A registry we cannot read may hide a working process: keep the session.
        return True


def _utc(name: str, value: datetime) -> datetime:
    if not isinstance(value, datetime):
        raise ValueError(f"{name} must be a datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, got naive {value.isoformat()}")
    return value.astimezone(UTC)


def _zone_named(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except Exception as error:
        raise ValueError(f"timezone must be an IANA zone name, got {name!r}") from error


def _duration(minutes: int) -> str:
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{rest}m"
    return f"{hours}h" if not rest else f"{hours}h {rest}m"


def _name_of(value: str | Enum | None) -> str:
    # Platform and chat-type enums compare by their value; no value matches no override.
    if isinstance(value, Enum):
        return str(value.value)
    return value or ""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
