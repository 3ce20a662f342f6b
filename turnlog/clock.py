"""Time and ids are injected so that tests and replays are deterministic."""

from __future__ import annotations

import secrets
import threading
from datetime import datetime, timedelta, timezone
from typing import Callable, Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


def lease_time(clock: Clock) -> datetime:
    """The time turn leases are judged by. A clock may keep it apart from the time events carry:
    a replay stamps events with the recorded times, while its leases must expire by the wall
    clock, as every other process on the log judges them (ingest.ReplayClock)."""
    lease_now = getattr(clock, "lease_now", None)
    return lease_now() if lease_now is not None else clock.now()


def event_and_lease_time(clock: Clock) -> tuple[datetime, datetime]:
    """One instant as an event's time and as lease time: read apart, a lease judged expired could
    be recorded as taken a moment before it expired."""
    now = clock.now()
    lease_now = getattr(clock, "lease_now", None)
    return now, (lease_now() if lease_now is not None else now)


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(timezone.utc)


class ManualClock:
    """A clock that moves only when told to; safe to share between threads."""

    def __init__(self, start: datetime | str = "2026-01-01T00:00:00+00:00") -> None:
        self._now = to_utc(datetime.fromisoformat(start) if isinstance(start, str) else start)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float = 0.0, **delta: float) -> datetime:
        with self._lock:
            self._now += timedelta(seconds=seconds, **delta)
            return self._now

    def set(self, when: datetime | str) -> None:
        with self._lock:
            self._now = to_utc(datetime.fromisoformat(when) if isinstance(when, str) else when)


def parse_aware_time(text: str) -> datetime:
    """An ASCII ISO-8601 time that names its zone (`Z` accepted). ValueError says which of the two
    it is not (other digits, e.g. Arabic-Indic, are not ISO-8601 whatever fromisoformat takes)."""
    if not text.isascii():
        raise ValueError("is not an ISO time (ASCII digits only)")
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("is not an ISO time") from None
    if when.tzinfo is None:
        raise ValueError("has no time zone")
    return when


def to_utc(when: datetime) -> datetime:
    if when.tzinfo is None:
        raise ValueError(f"naive datetime {when.isoformat()} has no time zone")
    return when.astimezone(timezone.utc)


SessionIdFactory = Callable[[datetime], str]


def hermes_session_id(now: datetime) -> str:
    """Hermes' format, `YYYYMMDD_HHMMSS_<8 hex>`, from UTC time instead of local wall time."""
    return f"{to_utc(now):%Y%m%d_%H%M%S}_{secrets.token_hex(4)}"


class SequentialIds:
    """Deterministic session ids for tests: `YYYYMMDD_HHMMSS_00000001`, ..."""

    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()

    def __call__(self, now: datetime) -> str:
        with self._lock:
            self._n += 1
            return f"{to_utc(now):%Y%m%d_%H%M%S}_{self._n:08x}"
