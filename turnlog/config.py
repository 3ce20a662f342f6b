"""Engine settings: the key rule's flags, the reset policy, and the lease timings."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, Mapping, Sequence

from .domain.batching import TextBatching
from .domain.delivery import HOLD, MAX_ATTEMPTS, RESEND
from .domain.env_flags import check_environment, env_seconds
from .domain.dedup import DEFAULT_DEDUP_TEXT_PLATFORMS, DEFAULT_DEDUP_WINDOW_S, check_windows
from .domain.key_settings import KeySettings
from .domain.policy import DEFAULT_FRESHNESS_WINDOW_S, ResetPolicies
from .domain.retention import Retention
from .errors import InvalidRequest

# A gateway's background-process registry: (session_key, session_id) -> is a process alive, or
# the start times of its live processes (those older than the policy's age cap are ignored).
BackgroundGuard = Callable[[str, str], "bool | Iterable[datetime]"]

# A gateway's summariser for in-place compaction (commands/compaction.py): given the history
# entries a summary replaces and the focus (or None), returns the summary as text or messages,
# or (summary, model); may be a coroutine function. Its `.model` attribute names its model.
Summariser = Callable[[Sequence[Any], "str | None"], Any]
COMPRESSION_MODES = ("in_place", "rotate")
GC_BETWEEN_TURNS = "between_turns"
GC_MODES = (GC_BETWEEN_TURNS, "default")  # turnlog/gc_turns.py

DEFAULT_LEASE_TIMEOUT_S = 1800.0
DEFAULT_LEASE_TTL_S = 30.0
DEFAULT_HEARTBEAT_TTL_S = 60.0


def _check_seconds(name: str, value: Any, *, zero_ok: bool) -> None:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value < 0 or (value == 0 and not zero_ok)):
        more = "0 or more" if zero_ok else "more than 0"
        env = {"lease_ttl_s": "TURNLOG_TURN_LEASE_TTL", "lease_timeout_s": "TURNLOG_TURN_LEASE_TIMEOUT",
               "heartbeat_ttl_s": "TURNLOG_HEARTBEAT_TTL"}[name]
        raise InvalidRequest(f"{name} (env {env}) must be a number of seconds, {more}, got {value!r}")


@dataclass(frozen=True)
class EngineConfig:
    # The key rule's two flags. None: as the log records them (`turnlog rekey`), else the defaults
    # (True, False). Once the log records settings they hold over these (docs/configuration.md).
    group_sessions_per_user: bool | None = None
    thread_sessions_per_user: bool | None = None
    profile: str | None = None  # used when a source names no profile of its own
    whatsapp_aliases: str | Mapping[str, Iterable[str]] | None = None
    reset: ResetPolicies = field(default_factory=ResetPolicies)
    freshness_window_s: float = field(
        default_factory=lambda: env_seconds("TURNLOG_AUTO_CONTINUE_FRESHNESS", DEFAULT_FRESHNESS_WINDOW_S, least="any")
    )
    background_guard: BackgroundGuard | None = None
    lease_timeout_s: float = field(
        default_factory=lambda: env_seconds("TURNLOG_TURN_LEASE_TIMEOUT", DEFAULT_LEASE_TIMEOUT_S)
    )
    lease_ttl_s: float = field(default_factory=lambda: env_seconds("TURNLOG_TURN_LEASE_TTL", DEFAULT_LEASE_TTL_S,
                                                                   least="more than 0"))
    # The same text from one sender on one key within this many seconds of its first sighting is a
    # duplicate (docs/behaviour.md §14) on these platforms ("*": all); 0 s or no platform turns that rule off.
    # Hermes applies it in its Weixin adapter only: elsewhere "ok", "ok" are two real messages.
    # Message ids are deduplicated on every platform, always.
    # One number for every platform, or one per platform ("*": the others): long enough for the
    # platform's retry window (Slack retries for ~5 min, Feishu for ~7 h); at most 8 h.
    dedup_window_s: float | Mapping[str, float] = DEFAULT_DEDUP_WINDOW_S
    dedup_text_platforms: frozenset[str] = DEFAULT_DEDUP_TEXT_PLATFORMS
    # Text batching (domain/batching.py), off unless platforms are named: with it, handle_message only
    # accepts a text and the gateway runs the merged burst with Turnlog.run_due_batches on a timer.
    text_batching: TextBatching = field(default_factory=TextBatching)
    # How often, at most, a running gateway looks for erases made by other processes (their data
    # keys destroyed), to forget the keys and cached transcripts it holds: seconds; 0: at every read
    # of an agent's history, which is when cached words would reach an agent.
    erasure_check_s: float = 1.0
    # How long a gateway boot counts as alive after its last heartbeat (renewed every third of it).
    heartbeat_ttl_s: float = field(
        default_factory=lambda: env_seconds("TURNLOG_HEARTBEAT_TTL", DEFAULT_HEARTBEAT_TTL_S, least="more than 0"))

    # Pre-turn hygiene (Turnlog.turns.compress): "in_place" compacts the history under the same
    # session id (the originals stay searchable); "rotate" continues in a child session.
    compression_mode: str = "in_place"
    summariser: Summariser | None = None  # None: the deterministic fallback summary

    # A reply's sends before it is dead-lettered for an operator (turnlog ledger retry | abandon).
    delivery_max_attempts: int = MAX_ATTEMPTS
    # What the sweep does with a send of unknown outcome when no reconcile hook can tell, by platform
    # ("*": the others): "resend" (with the recovered-reply prefix) or "hold" (for an operator).
    unknown_send_policy: Mapping[str, str] = field(default_factory=lambda: {"*": RESEND})

    # Which sessions `turnlog archive` takes (domain/retention.py): done with more than
    # `older_than` ago, or idle more than `idle_for`; and what a message on an archived session's
    # key does (`archived_key_policy`: "new" session, or "restore" the archive first).
    retention: Retention = field(default_factory=Retention)
    # Full garbage collections (tens of ms) out of turns: "between_turns" freezes what start-up
    # made and runs them when no turn is running in the process (turnlog/gc_turns.py);
    # "default": the interpreter's own, whenever an allocation sets one off.
    gc_mode: str = GC_BETWEEN_TURNS

    def key_settings(self) -> KeySettings:
        """The flags this config says, the defaults where it says nothing (the log's, once recorded, win)."""
        default = KeySettings()
        return KeySettings(
            default.group_sessions_per_user if self.group_sessions_per_user is None else self.group_sessions_per_user,
            default.thread_sessions_per_user if self.thread_sessions_per_user is None
            else self.thread_sessions_per_user)

    def disagreements(self, settings: KeySettings) -> list[str]:
        """The flags this config sets explicitly to something else than `settings`, as `name=value`."""
        return [f"{name}={str(mine).lower()}" for name, theirs in settings.to_dict().items()
                if (mine := getattr(self, name)) is not None and mine != theirs]

    def __post_init__(self) -> None:
        check_environment()  # the store's variables, read as it opens: refused here, before a file is made
        check_windows(self.dedup_window_s)
        _check_seconds("lease_ttl_s", self.lease_ttl_s, zero_ok=False)
        _check_seconds("lease_timeout_s", self.lease_timeout_s, zero_ok=True)
        _check_seconds("heartbeat_ttl_s", self.heartbeat_ttl_s, zero_ok=False)
        if not isinstance(self.delivery_max_attempts, int) or self.delivery_max_attempts < 1:
            raise InvalidRequest(f"delivery_max_attempts must be a positive integer, got {self.delivery_max_attempts!r}")
        bad = {p: v for p, v in dict(self.unknown_send_policy).items() if v not in (RESEND, HOLD)}
        if bad:
            raise InvalidRequest(f"unknown_send_policy values must be 'resend' or 'hold', got {bad!r}")
        if self.compression_mode not in COMPRESSION_MODES:
            raise InvalidRequest(f"compression_mode must be one of {', '.join(COMPRESSION_MODES)},"
                             f" got {self.compression_mode!r}")
        if not isinstance(self.retention, Retention):
            raise InvalidRequest(f"retention must be a Retention, got {self.retention!r}")
        if isinstance(self.erasure_check_s, bool) or not isinstance(self.erasure_check_s, (int, float)) \
                or not math.isfinite(self.erasure_check_s) or self.erasure_check_s < 0:
            raise InvalidRequest(f"erasure_check_s must be a number of seconds, 0 or more, got {self.erasure_check_s!r}")
        if self.gc_mode not in GC_MODES:
            raise InvalidRequest(f"gc_mode must be one of {', '.join(GC_MODES)}, got {self.gc_mode!r}")
        if self.summariser is not None and not callable(self.summariser):
            raise InvalidRequest(f"summariser must be callable, got {self.summariser!r}")

    def key_options(self) -> dict[str, Any]:
        """The key rule's options as this config says them (the engine routes by the log's settings
        once recorded: Turnlog.key_settings)."""
        return {**self.key_settings().to_dict(), "whatsapp_aliases": self.whatsapp_aliases}


__all__ = ["EngineConfig", "Retention", "TextBatching", "BackgroundGuard", "Summariser", "DEFAULT_FRESHNESS_WINDOW_S"]
