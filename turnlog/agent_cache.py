"""Warm agents per session, so a model's prompt cache survives between turns (seed 002 §11).

An LRU map of session id -> agent, built by the gateway's `factory`. An agent goes (through
`on_evict(session_id, agent, reason)`) when the cache is full (lru), when it was idle longer
than `idle_ttl_s` (idle), when anonymous memory is over the budget (memory: least recently used
first, never one in use nor among the `protect_recent` most recent, then the freed memory is
given back to the OS), when the session moved on elsewhere (stale), or when a session operation
ended or altered it (invalidated). An agent checked out for a turn is never evicted.

Staleness: each entry remembers the session's history version (`Turnlog.session_version`) as of
the end of its last checkout; when another process (another gateway, an operator's edit) moved
the history on since, the next checkout builds the agent again instead of reusing it. The version
is read again when a checkout ends, so the turn's own writes are not taken for someone else's:
check out around the whole gateway step (`handle_message`), not inside the responder.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Callable, Generic, Iterator, Protocol, TypeVar

from .memory import MiB, anonymous_memory, auto_budget, give_back_memory
from .clock import Clock, SystemClock
from .errors import InvalidRequest

log = logging.getLogger(__name__)

A = TypeVar("A")
EVICTION_REASONS = ("lru", "idle", "memory", "stale", "invalidated")
MISS_REASONS = ("absent", "stale")

OnEvict = Callable[[str, Any, str], None]


class SessionEvents(Protocol):
    """What `attach` uses of a Turnlog."""

    def session_version(self, session_id: str) -> int: ...

    def on_session_change(self, listener: Callable[[str, str], object]) -> Callable[[], None]: ...


@dataclass(frozen=True)
class CacheStats:
    """The cache's counters since it was made, and what it holds now."""

    hits: int
    misses: int  # every agent the factory built
    misses_by_reason: dict[str, int]  # absent (none cached) or stale (the session moved on)
    evictions: dict[str, int]  # by reason: lru, idle, memory, stale, invalidated
    size: int
    in_use: int
    memory_budget_bytes: int | None
    memory_trims: int  # memory sweeps that gave freed memory back to the OS

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Entry(Generic[A]):
    agent: A | None  # None while the factory builds it
    version: int | None
    last_used: datetime
    holder: int | None = None  # the thread that has it checked out
    depth: int = 0  # nested checkouts by that thread
    invalidated: str | None = None  # evict when the checkout ends


def budget_bytes(memory_high_mb: int | float | str | None) -> int | None:
    """The memory budget a `memory_high_mb` setting means: "auto" (a share of the cgroup limit,
    none without one), a number of MiB, or 0 / "off" / None (no memory sweep)."""
    if memory_high_mb in (None, 0, "off"):
        return None
    if memory_high_mb == "auto":
        return auto_budget()
    if isinstance(memory_high_mb, (int, float)) and not isinstance(memory_high_mb, bool) and memory_high_mb > 0:
        return int(memory_high_mb * MiB)
    raise InvalidRequest(f"memory_high_mb must be 'auto', 'off' or a positive number of MiB, not {memory_high_mb!r}")


class AgentCache(Generic[A]):
    """Agents kept warm by session id. Thread-safe; a session's agent is checked out by one
    thread at a time (another waits), so one agent never runs two turns at once."""

    def __init__(self, factory: Callable[[str], A], *, max_size: int = 128, idle_ttl_s: float | None = 3600,
                 memory_high_mb: int | float | str | None = "auto", protect_recent: int = 4,
                 on_evict: OnEvict | None = None, clock: Clock | None = None,
                 version: Callable[[str], int] | None = None,
                 anon_memory: Callable[[], int | None] | None = None) -> None:
        """`factory(session_id)` builds an agent; `on_evict(session_id, agent, reason)` is told of
        each one that goes (its errors are logged, not raised). `version(session_id)`: the
        session's history version (`attach(t)` sets it to `t.session_version`); None: never stale.
        `anon_memory()`: the anonymous bytes compared with the budget (default memory.anonymous_memory)."""
        if max_size < 1 or protect_recent < 0 or (idle_ttl_s is not None and idle_ttl_s <= 0):
            raise InvalidRequest("max_size must be at least 1, protect_recent at least 0, idle_ttl_s positive or None")
        self.factory = factory
        self.max_size = max_size
        self.idle_ttl_s = idle_ttl_s
        self.protect_recent = protect_recent
        self.on_evict = on_evict
        self.memory_budget_bytes = budget_bytes(memory_high_mb)
        self._clock = clock or SystemClock()
        self._version = version
        self._anon_memory = anon_memory or anonymous_memory
        self._entries: OrderedDict[str, _Entry[A]] = OrderedDict()  # least recently used first
        self._changed = threading.Condition()
        self._detach: Callable[[], None] | None = None
        self._hits = 0
        self._misses = dict.fromkeys(MISS_REASONS, 0)
        self._evictions = dict.fromkeys(EVICTION_REASONS, 0)
        self._trims = 0

    # -- wiring to a Turnlog ---------------------------------------------------------------

    def attach(self, t: SessionEvents) -> None:
        """Judge staleness by `t.session_version`, and invalidate a session's agent as soon as one
        of `t`'s commands ends or alters the session (`t.on_session_change`)."""
        self.detach()
        self._version = t.session_version
        self._detach = t.on_session_change(self.invalidate)

    def detach(self) -> None:
        """Stop listening to the attached Turnlog's session changes."""
        if self._detach is not None:
            self._detach()
            self._detach = None

    # -- getting agents --------------------------------------------------------------------

    @contextmanager
    def checkout(self, session_id: str) -> Iterator[A]:
        """The session's agent for a turn (cached, or built by the factory), never evicted until
        the block ends; then the history version it has seen is read again."""
        entry, agent = self._acquire(session_id)
        try:
            yield agent
        finally:
            self._release(session_id, entry)

    def get(self, session_id: str) -> A:
        """The session's agent (cached, or built), not kept checked out: it may be evicted at any
        time and remembers the history version as of now. For a turn use `checkout`."""
        entry, agent = self._acquire(session_id)
        self._release(session_id, entry)
        return agent

    def __contains__(self, session_id: object) -> bool:
        with self._changed:
            return session_id in self._entries

    def __len__(self) -> int:
        with self._changed:
            return len(self._entries)

    def _read_version(self, session_id: str) -> int | None:
        return self._version(session_id) if self._version is not None else None

    def _acquire(self, session_id: str) -> tuple[_Entry[A], A]:
        me = threading.get_ident()
        with self._changed:
            while (entry := self._entries.get(session_id)) is not None and entry.holder not in (None, me):
                self._changed.wait()
            if entry is None:
                entry = self._entries[session_id] = _Entry(None, None, self._clock.now())
            entry.holder, entry.depth = me, entry.depth + 1
            entry.last_used = self._clock.now()
            self._entries.move_to_end(session_id)
            if entry.depth > 1 and entry.agent is not None:
                self._hits += 1
                return entry, entry.agent
        try:
            return entry, self._fresh_agent(session_id, entry)
        except BaseException:
            self._release(session_id, entry, read_version=False)
            raise

    def _fresh_agent(self, session_id: str, entry: _Entry[A]) -> A:
        """The entry's agent, rebuilt when absent or stale (the entry is ours: checked out)."""
        version = self._read_version(session_id)  # before the factory reads the history
        old = entry.agent
        if old is not None and entry.version == version:
            with self._changed:
                self._hits += 1
            return old
        reason = "absent" if old is None else "stale"
        if old is not None:
            entry.agent = None
            self._told(session_id, old, "stale")
            del old
        agent = self.factory(session_id)
        entry.agent, entry.version = agent, version
        with self._changed:
            self._misses[reason] += 1
        self._evict_over_capacity()
        return agent

    def _release(self, session_id: str, entry: _Entry[A], *, read_version: bool = True) -> None:
        if read_version and entry.depth == 1 and entry.agent is not None:
            try:
                entry.version = self._read_version(session_id)
            except Exception:  # the log unreadable (closed?): the agent can no longer be trusted fresh
                log.exception("the history version of %s could not be read", session_id)
                entry.invalidated = "version unreadable"
        gone: list[tuple[str, A, str]] = []
        with self._changed:
            entry.depth -= 1
            entry.last_used = self._clock.now()
            if entry.depth == 0:
                entry.holder = None
                if (entry.agent is None or entry.invalidated) and self._entries.get(session_id) is entry:
                    del self._entries[session_id]
                    if entry.agent is not None:
                        gone.append((session_id, entry.agent, "invalidated"))
                    entry.agent = None
                self._changed.notify_all()
        self._tell(gone)
        if entry.depth == 0:
            self._evict_over_capacity()  # one built while the others were busy may be spare now

    # -- evictions -------------------------------------------------------------------------

    def invalidate(self, session_id: str, reason: str = "invalidated") -> bool:
        """Drop the session's agent (a session operation ended or altered it); one checked out goes
        when its checkout ends. `reason` is logged. Whether an agent was cached."""
        gone: list[tuple[str, A, str]] = []
        with self._changed:
            entry = self._entries.get(session_id)
            if entry is None:
                return False
            if entry.holder is not None:
                entry.invalidated = reason
                return True
            del self._entries[session_id]
            if entry.agent is not None:
                gone.append((session_id, entry.agent, "invalidated"))
                entry.agent = None
        log.debug("agent of %s invalidated: %s", session_id, reason)
        self._tell(gone)
        return True

    def clear(self) -> int:
        """Evict every agent not checked out (reason invalidated), e.g. when the gateway stops."""
        with self._changed:
            ids = [sid for sid, e in self._entries.items() if e.holder is None]
        return sum(self.invalidate(sid, "cleared") for sid in ids)

    def sweep_idle(self) -> int:
        """Evict the agents idle for idle_ttl_s or longer; how many went."""
        if self.idle_ttl_s is None:
            return 0
        now = self._clock.now()
        with self._changed:
            gone = self._take([sid for sid, e in self._entries.items()
                               if e.holder is None and (now - e.last_used).total_seconds() >= self.idle_ttl_s],
                              "idle")
        self._tell(gone)
        return len(gone)

    def sweep_memory(self) -> int:
        """While anonymous memory is over the budget, evict the least recently used agent (never
        one checked out, nor one of the protect_recent most recent) and give the freed memory
        back to the OS; how many went."""
        budget = self.memory_budget_bytes
        evicted = 0
        while budget is not None:
            used = self._anon_memory()
            if used is None or used <= budget:
                break
            with self._changed:
                gone = self._take(self._memory_victims()[:1], "memory")
            if not gone:
                break
            self._tell(gone)
            gone.clear()  # the last reference this sweep held: the agent can be freed now
            evicted += 1
            if give_back_memory():
                with self._changed:
                    self._trims += 1
        return evicted

    def sweep(self) -> int:
        """The housekeeping tick: the idle sweep, then the memory sweep; how many went."""
        return self.sweep_idle() + self.sweep_memory()

    def _memory_victims(self) -> list[str]:
        ids = list(self._entries)
        candidates = ids[: max(len(ids) - self.protect_recent, 0)]
        return [sid for sid in candidates if self._entries[sid].holder is None]

    def _evict_over_capacity(self) -> None:
        with self._changed:
            spare = [sid for sid, e in self._entries.items() if e.holder is None]
            gone = self._take(spare[: max(len(self._entries) - self.max_size, 0)], "lru")
        self._tell(gone)

    def _take(self, session_ids: list[str], reason: str) -> list[tuple[str, A, str]]:
        """Remove these entries (the lock held); what to tell on_evict once it is released."""
        gone = []
        for sid in session_ids:
            entry = self._entries.pop(sid)
            if entry.agent is not None:
                gone.append((sid, entry.agent, reason))
                entry.agent = None
        return gone

    def _tell(self, gone: list[tuple[str, A, str]]) -> None:
        for session_id, agent, reason in gone:
            self._told(session_id, agent, reason)

    def _told(self, session_id: str, agent: A, reason: str) -> None:
        with self._changed:
            self._evictions[reason] += 1
        if self.on_evict is None:
            return
        try:
            self.on_evict(session_id, agent, reason)
        except Exception:  # the agent is gone either way; the gateway's hook must not break a turn
            log.exception("on_evict failed for the agent of %s (%s)", session_id, reason)

    # -- counters --------------------------------------------------------------------------

    def stats(self) -> CacheStats:
        """Hits, misses and evictions by reason so far, and the entries now."""
        with self._changed:
            return CacheStats(
                hits=self._hits, misses=sum(self._misses.values()), misses_by_reason=dict(self._misses),
                evictions=dict(self._evictions), size=len(self._entries),
                in_use=sum(1 for e in self._entries.values() if e.holder is not None),
                memory_budget_bytes=self.memory_budget_bytes, memory_trims=self._trims)
