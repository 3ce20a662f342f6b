"""Reads of the counts read model (counts.py)."""

from __future__ import annotations

import sqlite3


def event_counts(db: sqlite3.Connection) -> dict[tuple[str, str], int]:
    """(counter, label) -> how many such events the log holds, as far as the model has read it."""
    return {(c, label): v for c, label, v in db.execute("SELECT counter, label, value FROM event_counts")}
