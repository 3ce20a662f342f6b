"""A hash chain over the stored log: tamper evidence for the public record.

Each committed event is sealed in order: its hash covers the previous hash and the event's own
stored bytes (position, stream id, version, topic, state). Verifying recomputes the chain from
the log and names the first position whose event was edited, deleted or moved.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from typing import Any

from eventsourcing.application import Application

GENESIS = "0" * 64
BATCH = 5000


def link(previous: str, n: Any) -> str:
    h = hashlib.sha256()
    h.update(previous.encode())
    h.update(f"|{n.id}|{n.originator_id}|{n.originator_version}|{n.topic}|".encode())
    h.update(bytes(n.state))
    return h.hexdigest()


@dataclass(frozen=True)
class ChainBreak:
    position: int
    problem: str  # edited | missing | unexpected

    def to_dict(self) -> dict[str, Any]:
        return {"position": self.position, "problem": self.problem}


class ChainSealer:
    def __init__(self, app: Application, db: sqlite3.Connection) -> None:
        self.app = app
        self.db = db
        db.execute("CREATE TABLE IF NOT EXISTS chain (position INTEGER PRIMARY KEY, hash TEXT NOT NULL)")

    def _last(self) -> tuple[int, str]:
        row = self.db.execute("SELECT position, hash FROM chain ORDER BY position DESC LIMIT 1").fetchone()
        return (row[0], row[1]) if row else (0, GENESIS)

    def seal(self, stop: int | None = None) -> int:
        """Seal every committed event not sealed yet; returns how many were sealed.

        Events are read before the write transaction is opened: holding the file's write lock
        while waiting for a log connection would deadlock against a writer waiting for the lock.
        """
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
                previous = link(previous, n)
                rows.append((n.id, previous))
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

    def verify(self) -> list[ChainBreak]:
        """Recompute each sealed link from the log; [] when intact.

        Each event is checked against the seal of the position before it, so one edited,
        deleted or moved event is named by its own position instead of breaking everything after.
        """
        sealed = dict(self.db.execute("SELECT position, hash FROM chain").fetchall())
        if not sealed:
            return []
        head = max(sealed)
        breaks: list[ChainBreak] = []
        seen: set[int] = set()
        start = 0
        while True:
            batch = self.app.recorder.select_notifications(start, BATCH, stop=head, inclusive_of_start=False)
            if not batch:
                break
            for n in batch:
                seen.add(n.id)
                if n.id not in sealed:
                    breaks.append(ChainBreak(n.id, "unexpected"))
                    continue
                previous = sealed.get(n.id - 1, GENESIS if n.id == 1 else None)
                if previous is None:
                    previous = max(((p, h) for p, h in sealed.items() if p < n.id), default=(0, GENESIS))[1]
                if link(previous, n) != sealed[n.id]:
                    breaks.append(ChainBreak(n.id, "edited"))
            start = batch[-1].id
        breaks.extend(ChainBreak(p, "missing") for p in sealed if p not in seen)
        return sorted(breaks, key=lambda b: b.position)
