"""Verifying the hash chain over the stored log: tamper evidence for the public record.

On SQLite the recorder seals each event in the transaction that writes it
(storage/recorder.py), so verification only reads: it recomputes every link from the log and
names each position whose event was edited, deleted, moved, or is not sealed at all (a forged
insert, a shortened or dropped chain). A PostgreSQL log is still sealed after the fact by
`seal()`, from the read-model file.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from eventsourcing.application import Application

from .recorder import SealingRecorder
from ..domain.archive import LOG_RESHAPING_TOPICS, SessionsArchived, seals_digest
from ..domain.chain import GENESIS, as_hex, link, matches
from ..domain.retention import run_positions

BATCH = 5000


def link_of(previous: str, n: Any) -> str:
    return link(previous, n.id, n.originator_id, n.originator_version, n.topic, n.state)


@dataclass(frozen=True)
class ChainBreak:
    position: int
    problem: str  # edited | missing | unsealed
    through: int | None = None  # the last position of a run of unsealed events

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"position": self.position, "problem": self.problem}
        if self.through is not None:
            out["through"] = self.through
        return out


@dataclass(frozen=True)
class ChainReport:
    breaks: list[ChainBreak]
    sealed_late: tuple[int, int] | None  # positions written before sealing on write, sealed by a later write


class ChainSealer:
    def __init__(self, app: Application, db: sqlite3.Connection) -> None:
        self.app = app
        self.db = db
        self.on_write = isinstance(app.recorder, SealingRecorder)

    def _after_the_fact(self) -> None:
        self.db.execute("CREATE TABLE IF NOT EXISTS chain (position INTEGER PRIMARY KEY, hash TEXT NOT NULL)")

    def _last(self) -> tuple[int, str]:
        row = self.db.execute("SELECT position, hash FROM chain ORDER BY position DESC LIMIT 1").fetchone()
        return (row[0], as_hex(row[1])) if row else (0, GENESIS)

    def seal(self, stop: int | None = None) -> int:
        """Seal every committed event not sealed yet; returns how many were sealed (always 0 where
        the recorder seals as it writes: nothing is left for a reader to vouch for)."""
        if self.on_write:
            return 0
        self._after_the_fact()
        target = self.app.recorder.max_notification_id() or 0 if stop is None else stop
        sealed = 0
        while True:
            position, previous = self._last()
            if position >= target:
                return sealed
            batch = self.app.recorder.select_notifications(position, BATCH, stop=target, inclusive_of_start=False)
            if not batch:
                return sealed
            rows = []
            for n in batch:
                previous = link_of(previous, n)
                rows.append((n.id, previous))
            # Events are read before the write transaction: holding the file's write lock while
            # waiting for a log connection would deadlock against a writer waiting for the lock.
            self.db.execute("BEGIN IMMEDIATE")
            try:
                if self._last()[0] != position:  # another process sealed meanwhile: start again from its seal
                    self.db.execute("ROLLBACK")
                    continue
                self.db.executemany("INSERT INTO chain VALUES (?, ?)", rows)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            sealed += len(rows)

    def _sealed(self) -> tuple[dict[int, str], int | None]:
        recorder = self.app.recorder
        if isinstance(recorder, SealingRecorder):
            return recorder.chain_state()
        self._after_the_fact()
        return {p: as_hex(h) for p, h in self.db.execute("SELECT position, hash FROM chain")}, 1

    def report(self) -> ChainReport:
        """Recompute each link from the log and name every position that does not match.

        Each event is checked against the seal of the position before it, so one edited,
        deleted or moved event is named by its own position instead of breaking everything after.
        An event without a seal is a break: nothing writes an event without sealing it (a log
        from before sealing on write, never written to since, reports its events unsealed too).
        """
        sealed, sealed_from = self._sealed()
        head_event = self.app.recorder.max_notification_id() or 0
        head = max(max(sealed, default=0), head_event)
        breaks: list[ChainBreak] = []
        seen: set[int] = set()
        start = 0
        while start < head:
            batch = self.app.recorder.select_notifications(start, BATCH, stop=head, inclusive_of_start=False)
            if not batch:
                break
            for n in batch:
                seen.add(n.id)
                if n.id not in sealed:
                    breaks.append(ChainBreak(n.id, "unsealed"))
                    continue
                previous = sealed.get(n.id - 1, GENESIS if n.id == 1 else None)
                if previous is None:
                    previous = max(((p, h) for p, h in sealed.items() if p < n.id), default=(0, GENESIS))[1]
                if not matches(link_of(previous, n), sealed[n.id]):
                    breaks.append(ChainBreak(n.id, "edited"))
            start = batch[-1].id
        archived, archives = self._archived()
        breaks.extend(ChainBreak(p, "missing") for p in sealed if p not in seen and p not in archived)
        for position, digest, positions in archives:
            # The archive's event stands for the events it took away: their seals must be the ones it
            # names. A log that never held them (copied after the archive: its chain links over the
            # hole) has none of those seals, and nothing to check them against.
            held = [p for p in positions if p in sealed]
            if held and (len(held) != len(positions) or seals_digest((p, sealed[p]) for p in positions) != digest):
                breaks.append(ChainBreak(position, "edited"))
        late = (1, sealed_from - 1) if sealed_from is not None and sealed_from > 1 else None
        return ChainReport(_runs(sorted(breaks, key=lambda b: b.position)), late)

    def _archived(self) -> tuple[set[int], list[tuple[int, str, list[int]]]]:
        """The positions archive files hold now (archived, not restored since), and per archive
        still out: the position of its SessionsArchived event, its seals digest and positions."""
        latest: dict[str, tuple[int, Any]] = {}
        start = 0
        while True:
            batch = self.app.recorder.select_notifications(start, BATCH, topics=list(LOG_RESHAPING_TOPICS),
                                                           inclusive_of_start=False)
            for n in batch:
                event: Any = self.app.mapper.to_domain_event(n)
                latest[event.archive_sha256] = (n.id, event)
            if len(batch) < BATCH:
                break
            start = batch[-1].id
        positions: set[int] = set()
        archives = []
        for position, event in latest.values():
            if isinstance(event, SessionsArchived):
                held = run_positions(event.positions)
                positions.update(held)
                archives.append((position, event.seals_digest, held))
        return positions, archives

    def verify(self) -> list[ChainBreak]:
        return self.report().breaks


def _runs(breaks: list[ChainBreak]) -> list[ChainBreak]:
    """Consecutive unsealed positions as one break (a dropped chain is one line, not thousands)."""
    out: list[ChainBreak] = []
    for b in breaks:
        last = out[-1] if out else None
        if (b.problem == "unsealed" and last is not None and last.problem == "unsealed"
                and (last.through or last.position) + 1 == b.position):
            out[-1] = ChainBreak(last.position, "unsealed", b.position)
        else:
            out.append(b)
    return out
