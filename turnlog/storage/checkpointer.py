"""Copying the write-ahead log into the database file off the turn's path.

SQLite's automatic checkpoint runs inside the commit that pushes the WAL past 1,000 pages: one
commit in about 200 then copies 4 MB and syncs the file, 5–30 ms, and those commits were most of
the slow 1% of turns (README, Figures). Here the writer commits with that threshold raised, and a
thread of its own, on its own connection, runs a PASSIVE checkpoint (it waits for no reader or
writer, and blocks none) at most every `interval` seconds while there are new commits. The writer's
raised threshold still bounds the WAL if this thread falls behind (a long reader pinning old
frames): the commit that passes it checkpoints as before.

TURNLOG_WAL_CHECKPOINT=inline restores SQLite's own checkpoint in the commit.
"""

from __future__ import annotations

import sqlite3
import threading

from ..domain.env_flags import WAL_CHECKPOINT, env_choice

# The writer's own checkpoint, only if the background one falls this far behind (40 MB).
WRITER_AUTOCHECKPOINT_PAGES = 10_000
INTERVAL_S = 0.1
# The thread ends after this long without a commit (the next commit starts another), so a store
# that is never closed does not keep a thread and a connection for the life of the process.
IDLE_S = 2.0


def background_checkpoints() -> bool:
    return env_choice(*WAL_CHECKPOINT) == "background"


class WalCheckpointer:
    def __init__(self, db_name: str, *, lock_timeout: float, interval: float = INTERVAL_S) -> None:
        self.db_name = db_name
        self.lock_timeout = lock_timeout
        self.interval = interval
        self._committed = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._working = threading.Lock()  # held while the thread touches SQLite

    def committed(self) -> None:
        """The writer committed: there are frames to copy (cheap; starts the thread if none runs)."""
        with self._lock:
            self._committed.set()
            if self._thread is None and not self._stopping.is_set():
                self._thread = threading.Thread(target=self._run, name="turnlog-wal-checkpoint", daemon=True)
                # It works only while holding this lock, so a rebuild can fork a helper while it
                # holds it still (projections/parallel.py).
                self._thread.fork_guard = self._working  # type: ignore[attr-defined]
                self._thread.start()

    def close(self) -> None:
        """Stop the thread (a checkpoint under way finishes first); the last connection to close
        checkpoints what is left, as SQLite always does."""
        with self._lock:
            self._stopping.set()
            self._committed.set()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                if not self._committed.wait(IDLE_S):
                    with self._lock:
                        if not self._committed.is_set():  # idle: end (a commit now starts another)
                            self._thread = None
                            return
                if self._stopping.is_set():
                    return
                self._committed.clear()
                with self._working:
                    try:
                        if conn is None:
                            conn = sqlite3.connect(self.db_name, uri=True, timeout=self.lock_timeout,
                                                   isolation_level=None, check_same_thread=False)
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    except sqlite3.Error:
                        pass  # another checkpoint under way, or the file is busy: the next commit tries again
                if self._stopping.wait(self.interval):
                    return
        finally:
            if conn is not None:
                with self._working:
                    conn.close()
