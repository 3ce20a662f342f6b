"""Full (generation-2) garbage collections kept out of turns: `EngineConfig.gc_mode`.

A full collection scans every object the process tracks (the libraries', the read models'
caches, the aggregates): tens of milliseconds that land in whichever turn allocates at the wrong
moment, holding its lease. With "between_turns" (the default) the first such engine in a process
collects once and freezes what start-up left (`gc.freeze()`: never scanned again; reference
counting still frees it, a reference cycle among it is kept until the process ends); while any
turn runs in the process the interpreter's own full collections are off, and when the last one
ends a full collection runs if one is due. Between turns (a read-only viewer, an idle gateway)
the interpreter collects as it always does. Young collections (generations 0 and 1, a
millisecond or less) run as before. A turn that begins meanwhile waits for the collection to
end, before it routes or takes any lease. When turns overlap without a break for long (one is
overdue ten times over, as with the asyncio API's many keys in flight), the next turn to begin
runs it at once, inside the running turns: one pause, where waiting for them to end would stall
every new turn (and, on the asyncio API, hold the store slots they need to end).

"Due" follows the interpreter's own rule: ten young generation-1 collections since the last full
one, and the objects that may have reached the old generation since then (at most a young
collection's worth each) at least a quarter of those that survived the last one.

`in_turn()` says whether a turn is running in this process, for a `gc.callbacks` hook that checks
no full collection runs inside one (the tests do).
"""

from __future__ import annotations

import gc
import threading

_NEVER = 1 << 30  # a generation-2 threshold the interpreter never reaches
_FULL_AFTER = 10  # generation-1 collections before a full one is considered (the interpreter's default)
_OVERDUE = 10  # times _FULL_AFTER: then the next turn to begin collects, inside the running ones


class _Process:
    """The turns running in this process, across its engines, and its full collections."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.turns = 0
        self.engines = 0  # open engines with gc_mode "between_turns"
        self.frozen = False
        self.raised: tuple[int, int, int] | None = None  # the thresholds a turn's start put aside
        self.survivors = 0  # tracked outside the frozen set after the last full collection
        self.collections = 0  # full collections run between turns

    def engine_opened(self) -> None:
        with self.lock:
            if not self.frozen:
                gc.collect()
                gc.freeze()
                self.frozen = True
            self.engines += 1

    def engine_closed(self) -> None:
        with self.lock:
            self.engines -= 1

    def turn_began(self) -> None:
        with self.lock:
            if self.turns == 0 and self.engines:
                self._collect_if_due()
                self.raised = gc.get_threshold()
                gc.set_threshold(self.raised[0], self.raised[1], _NEVER)
            elif self.engines and self._due(_OVERDUE * _FULL_AFTER):
                self._collect()  # turns overlap without a break: one pause now, not a stall of new turns
            self.turns += 1

    def turn_ended(self) -> None:
        with self.lock:
            self.turns -= 1
            if self.turns == 0:
                if self.raised is not None:
                    gc.set_threshold(*self.raised)
                    self.raised = None
                if self.engines:
                    self._collect_if_due()

    def _collect_if_due(self) -> None:
        if self._due(_FULL_AFTER):
            self._collect()
            self.collections += 1

    def _collect(self) -> None:
        # Under the lock: no turn begins while it runs (finalisers may switch threads).
        gc.collect(2)
        self.survivors = len(gc.get_objects(2))

    def _due(self, after: int) -> bool:
        young, middle, _ = self.raised or gc.get_threshold()
        since_full = gc.get_count()[2]
        return since_full >= after and since_full * young * middle >= self.survivors // 4


_PROCESS = _Process()


def in_turn() -> bool:
    """Whether a turn an engine runs (handle_message, run_next, the asyncio API, a resume) is in
    progress in this process, from its routing to its lease's release."""
    return _PROCESS.turns > 0


def collections_between_turns() -> int:
    """How many full collections this process ran between turns (gc_mode "between_turns")."""
    return _PROCESS.collections


class EngineTurns:
    """One engine's part in the process's count: its turns (by id) and, with "between_turns",
    its say in when the full collections run."""

    def __init__(self, between_turns: bool) -> None:
        self.between_turns = between_turns
        self._registered = False
        self._counted: set[int] = set()
        self._lock = threading.Lock()

    def engine_ready(self) -> None:
        """The engine has started (its read models open and caught up): what it made is frozen."""
        if self.between_turns and not self._registered:
            _PROCESS.engine_opened()
            self._registered = True

    def began(self, turn: object) -> None:
        _PROCESS.turn_began()
        with self._lock:
            self._counted.add(id(turn))

    def ended(self, turn: object) -> None:
        with self._lock:
            counted = id(turn) in self._counted
            self._counted.discard(id(turn))
        if counted:
            _PROCESS.turn_ended()

    def engine_closed(self) -> None:
        # Its turns still counted (one begun and never answered, one the close gave up waiting
        # for) run no more: counted on, they would hold the process's collections back for good.
        with self._lock:
            left = len(self._counted)
            self._counted.clear()
        for _ in range(left):
            _PROCESS.turn_ended()
        if self._registered:
            self._registered = False
            _PROCESS.engine_closed()


__all__ = ["in_turn", "collections_between_turns"]
