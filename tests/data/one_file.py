"""The generators' last step: a database copied into one file (no write-ahead log beside it)."""

from __future__ import annotations

import os
import sqlite3


def one_file_copy(src: str, out: str) -> sqlite3.Connection:
    """`src` copied to `out` with VACUUM INTO, in rollback-journal mode; returns a connection to
    `out` for what the generator still changes."""
    if os.path.exists(out):
        os.remove(out)
    conn = sqlite3.connect(src)
    conn.execute("VACUUM INTO ?", (out,))
    conn.close()
    conn = sqlite3.connect(out, isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE")
    return conn
