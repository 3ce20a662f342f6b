"""What an SQLite error says, by its result code: a file that is not a database (or is damaged),
a lock another connection holds, or a problem of the disk or system under the file (full,
permission, I/O) that says nothing about what the file holds.

An operator told "not a turnlog database" may delete the file; that must be said only when
SQLite has read the file and found it is not one.
"""

from __future__ import annotations

import sqlite3

_SYSTEM = (  # result-code prefixes, each with what it means to an operator
    ("SQLITE_FULL", "the disk is full"),
    ("SQLITE_IOERR_NOMEM", "out of memory"),
    ("SQLITE_IOERR_ACCESS", "permission denied"),
    ("SQLITE_IOERR", "an I/O error"),
    ("SQLITE_NOMEM", "out of memory"),
    ("SQLITE_PERM", "permission denied"),
    ("SQLITE_AUTH", "permission denied"),
    ("SQLITE_READONLY", "it cannot be written"),
    ("SQLITE_CANTOPEN", "it cannot be opened"),
    ("SQLITE_BUSY", "another process holds a lock on it"),
    ("SQLITE_LOCKED", "another connection holds a lock on it"),
)
_MESSAGES = (  # the library's messages, for an error raised without its code
    ("disk is full", "the disk is full"),
    ("disk i/o error", "an I/O error"),
    ("unable to open database file", "it cannot be opened"),
    ("database is locked", "another process holds a lock on it"),
    ("readonly database", "it cannot be written"),
    ("out of memory", "out of memory"),
)


def error_name(error: BaseException) -> str:
    return getattr(error, "sqlite_errorname", "") or ""


def is_busy(error: BaseException) -> bool:
    """Another connection holds the lock this statement needed (it waited its busy timeout)."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    name = error_name(error)
    if name:
        return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))
    return "database is locked" in str(error)


def system_problem(error: BaseException) -> str | None:
    """What went wrong outside the file's contents ("the disk is full", "an I/O error", …), or
    None when the error is about the contents (not a database, damaged) or unknown."""
    if not isinstance(error, sqlite3.Error):
        return None
    name = error_name(error)
    if name:
        return next((what for prefix, what in _SYSTEM if name.startswith(prefix)), None)
    text = str(error).lower()
    return next((what for needle, what in _MESSAGES if needle in text), None)


def damage_in(error: BaseException) -> sqlite3.DatabaseError | None:
    """The sqlite3 error under `error` when it says the file is damaged (is_damaged), else None.
    The event store's library wraps sqlite3's errors in its own: the chain of causes is followed."""
    seen: BaseException | None = error
    visited: set[int] = set()  # a chain may loop (an error raised again from its own handler)
    while seen is not None and not isinstance(seen, sqlite3.DatabaseError) and id(seen) not in visited:
        visited.add(id(seen))
        seen = seen.__cause__ or seen.__context__
    if not isinstance(seen, sqlite3.DatabaseError) or not is_damaged(seen):
        return None
    return seen if _made_by_the_store(seen) else None


# The packages whose SQLite calls read turnlog's own files.
_STORE_PACKAGES = ("turnlog.", "eventsourcing.")


def _made_by_the_store(error: BaseException) -> bool:
    """Whether the SQLite call that failed was turnlog's or its event store's: a gateway's agent
    or sender may read a damaged database of its own, which says nothing of turnlog's file."""
    tb = error.__traceback__
    if tb is None:
        return True  # not raised through Python frames: nothing says it is another's
    while tb.tb_next is not None:
        tb = tb.tb_next
    return str(tb.tb_frame.f_globals.get("__name__", "")).startswith(_STORE_PACKAGES)


def is_damaged(error: BaseException) -> bool:
    """SQLite read the file and found its pages damaged (SQLITE_CORRUPT: "database disk image is
    malformed"): a database of some kind, hurt, not a file of the wrong kind."""
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    name = error_name(error)
    if name:
        return name.startswith("SQLITE_CORRUPT")
    return "malformed" in str(error).lower()
