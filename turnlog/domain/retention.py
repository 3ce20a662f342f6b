"""Retention: which sessions may leave the hot log for an archive file, at a moment `now`.

A session is archivable when it is done with (ended by a reset or a rotation, suspended or
superseded: no key routes to it live) and that happened more than `older_than` ago, or when it
has been idle (no change at all) more than `idle_for`. Never a session that currently owns a key
(a key routes to it and it is neither ended nor suspended), holds a turn lease, owes a delivery,
has messages queued, or is archived already. Pure: the caller gathers the facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

ARCHIVED_KEY_POLICIES = ("new", "restore")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdwy])\s*", re.ASCII)  # ASCII digits only


def parse_duration(text: str) -> timedelta:
    """'90d', '12h', '2w', '1y' (365 days), '30m', '45s' -> a timedelta; ValueError otherwise."""
    found = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise ValueError(f"not a duration: {text!r} (a number and one of s, m, h, d, w, y: e.g. 90d)")
    try:
        return timedelta(seconds=float(found.group(1)) * _UNITS[found.group(2)])
    except OverflowError:
        raise ValueError(f"duration too long: {text!r} (at most {timedelta.max.days} days)") from None


@dataclass(frozen=True)
class Retention:
    """`older_than`: archive sessions done with more than this long ago; `idle_for`: archive
    sessions unchanged for more than this long (None: that rule is off; both None: nothing is
    archivable). `archived_key_policy`: a message on the key of an archived session starts a new
    session ("new") or brings the archive back first ("restore")."""

    older_than: timedelta | None = timedelta(days=90)
    idle_for: timedelta | None = timedelta(days=365)
    archived_key_policy: str = "new"

    def __post_init__(self) -> None:
        if self.archived_key_policy not in ARCHIVED_KEY_POLICIES:
            raise ValueError(f"archived_key_policy must be one of {', '.join(ARCHIVED_KEY_POLICIES)},"
                             f" got {self.archived_key_policy!r}")
        for name in ("older_than", "idle_for"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, timedelta) or value < timedelta(0)):
                raise ValueError(f"{name} must be a non-negative timedelta or None, got {value!r}")


@dataclass(frozen=True)
class SessionFacts:
    """What retention needs to know of one session (read models and leases, gathered by the caller)."""

    session_id: str
    routed: bool  # a routing key points at it
    ended_at: datetime | None
    suspended: bool
    last_change: datetime  # its latest event: activity, a flag, an end
    holds_lease: bool = False
    owes_delivery: bool = False
    queued: bool = False
    archived: bool = False


def owns_key(s: SessionFacts) -> bool:
    return s.routed and s.ended_at is None and not s.suspended


def done_with(s: SessionFacts) -> bool:
    """Ended, suspended, or superseded (no key routes to it)."""
    return s.ended_at is not None or s.suspended or not s.routed


def why_archivable(s: SessionFacts, now: datetime, policy: Retention) -> str | None:
    """The rule that makes the session archivable ("ended" or "idle"), or None when it stays."""
    if s.archived or s.holds_lease or s.owes_delivery or s.queued or owns_key(s):
        return None
    if policy.older_than is not None and done_with(s) and now - (s.ended_at or s.last_change) > policy.older_than:
        return "ended"
    if policy.idle_for is not None and now - s.last_change > policy.idle_for:
        return "idle"
    return None


def archivable(sessions: list[SessionFacts], now: datetime, policy: Retention) -> list[tuple[str, str]]:
    """(session_id, rule) of each archivable session, in the order given."""
    out = []
    for s in sessions:
        rule = why_archivable(s, now, policy)
        if rule is not None:
            out.append((s.session_id, rule))
    return out


def position_runs(positions: list[int]) -> list[list[int]]:
    """Sorted positions as [first, last] runs (what an archive event records)."""
    runs: list[list[int]] = []
    for p in sorted(positions):
        if runs and runs[-1][1] + 1 == p:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return runs


def run_positions(runs: list[list[int]]) -> list[int]:
    return [p for first, last in runs for p in range(first, last + 1)]
