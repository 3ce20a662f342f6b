"""What tests read of an SQLite database's files: its write-ahead log folded in first."""

from __future__ import annotations

import sqlite3


def checkpoint(db: str) -> None:
    """Fold the -wal into the main file and truncate it, so the file holds what was committed."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
