"""Reads of the counts read model (counts.py)."""

from __future__ import annotations

import sqlite3


def event_counts(db: sqlite3.Connection) -> dict[tuple[str, str], int] | None:
    """(counter, label) -> how many such events the log holds, as far as the model has read it;
    None when the model is not there (a file opened read-only since before it existed)."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='event_counts'").fetchone() is None:
        return None
    return {(c, label): v for c, label, v in db.execute("SELECT counter, label, value FROM event_counts")}
