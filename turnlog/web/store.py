"""Opening the database the viewer shows, without ever writing to it.

The ONE place that opens the store for the viewer. The viewer reads a private snapshot: the
file is copied through SQLite's backup API (one read transaction: the database as of one commit)
from a connection that cannot write, and Turnlog opens the copy, where catching up the read
models is harmless.

The source is read `mode=ro`, which takes SQLite's locks like any reader: a writer mid-commit
(a rollback-journal database) is waited for, up to LOCK_WAIT_S, then the reload is refused as
Busy. One case is read `immutable=1` instead: a WAL database with no -wal beside it, which no
connection has open (the last one to close removes the -wal). A locking reader of it would
create a -wal and -shm beside the user's file and, read-only, could not remove them; so it is
copied without locks, and the copy is kept only if the file is seen unchanged after it (same
inode, size, mtime and header, still no -wal or -journal): a writer that came meanwhile makes it
read again `mode=ro`, through that writer's -wal.

A copy holds every transcript of the database, so it is readable by its owner only, it is
removed when the viewer closes it, and its folder is named after the viewer's pid so that a
later start can remove the copies of viewers that died without closing theirs.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import tempfile
from contextlib import closing
from dataclasses import dataclass
from urllib.parse import quote

from .. import InvalidRequest, NotFound, Turnlog, TurnlogError

PREFIX = "turnlog-web-"
# How long a reload waits for a writer's lock on the source before it answers busy.
LOCK_WAIT_S = 5.0
_OWNED = re.compile(re.escape(PREFIX) + r"(\d+)-")


class Busy(TurnlogError):
    """The viewer cannot take this on now (a reload still draining, too much heavy work running,
    the database locked by a writer)."""


@dataclass
class Copy:
    """An open snapshot copy: the Turnlog on it and the private folder it lives in."""
    t: Turnlog
    folder: str

    def close(self) -> None:
        try:
            self.t.close()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def open_read_only(path: str) -> Copy:
    if "://" in path and not path.startswith("sqlite://"):
        raise InvalidRequest(f"turnlog web reads an SQLite file, not {path!r}")
    source = os.path.abspath(path.removeprefix("sqlite://"))
    if not os.path.isfile(source):
        raise NotFound(f"no database file {source}")
    folder = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")  # mkdtemp: mode 0700
    copy = os.path.join(folder, "snapshot.db")
    try:
        # Created before SQLite opens it, so it is never readable by others, not even briefly;
        # SQLite gives its -wal and -shm the same mode.
        os.close(os.open(copy, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        _snapshot(source, copy)
        _copy_key_file(source, copy)
        t = Turnlog(copy, owner="web")
    except sqlite3.Error as e:
        shutil.rmtree(folder, ignore_errors=True)
        code = getattr(e, "sqlite_errorcode", None) or 0
        if code & 0xFF == sqlite3.SQLITE_BUSY:  # and its extended codes
            raise Busy(f"{source} is being written (its lock was held over {LOCK_WAIT_S:g} s); try again") from None
        if code == sqlite3.SQLITE_READONLY_ROLLBACK:  # a reader may not roll a hot journal back
            raise InvalidRequest(f"cannot read {source}: a writer stopped mid-commit and left its journal; the next"
                                 " open that may write (a gateway, any turnlog command that writes) rolls it back")\
                from None
        raise InvalidRequest(f"cannot read {source}: {e}") from None
    except OSError as e:
        shutil.rmtree(folder, ignore_errors=True)
        raise InvalidRequest(f"cannot read {source}: {e}") from None
    except TurnlogError as e:  # e.g. not a turnlog database: say so of the user's file, not the copy
        shutil.rmtree(folder, ignore_errors=True)
        raise type(e)(str(e).replace(copy, source)) from None
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return Copy(t, folder)


def _snapshot(source: str, copy: str) -> None:
    quiet = _unopened_wal_database(source)
    if quiet is not None:
        _backup(source, copy, "immutable=1")
        if _unopened_wal_database(source) == quiet:
            return
    _backup(source, copy, "mode=ro")


def _backup(source: str, copy: str, mode: str) -> None:
    with closing(sqlite3.connect(f"file:{quote(source)}?{mode}", uri=True, timeout=LOCK_WAIT_S,
                                 isolation_level=None)) as src, closing(sqlite3.connect(copy)) as dest:
        # The read transaction is begun here, where a lock held too long raises SQLITE_BUSY:
        # the backup API would retry a busy source forever. It copies within that transaction.
        src.execute("BEGIN")
        src.execute("SELECT count(*) FROM sqlite_master").fetchone()
        src.backup(dest)


def _unopened_wal_database(source: str) -> tuple[object, ...] | None:
    """What identifies the file's state now, if it is a WAL database that no connection has open;
    None otherwise (a rollback-journal database, a -wal or -journal beside it)."""
    if os.path.exists(source + "-wal") or os.path.exists(source + "-journal"):
        return None
    with open(source, "rb") as f:
        st = os.fstat(f.fileno())
        header = f.read(100)
    if header[18:20] != b"\x02\x02":  # the read and write versions: 2 is WAL
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, header


def _copy_key_file(source: str, copy: str) -> None:
    """An encrypted database's key file goes beside its copy (in the same private folder), so the
    copy opens as the database does; a key from TURNLOG_MASTER_KEY needs nothing."""
    key = source + ".key"
    if not os.path.isfile(key):
        return
    with open(key, "rb") as f:
        data = f.read()
    fd = os.open(copy + ".key", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def remove_stale_copies(root: str | None = None) -> list[str]:
    """Remove the snapshot folders of viewers whose process is gone; returns the folders removed.
    Folders of a live process (or of a pid this user may not signal) are left alone."""
    root = root or tempfile.gettempdir()
    removed: list[str] = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        match = _OWNED.match(name)
        if match is None or _alive(int(match.group(1))):
            continue
        folder = os.path.join(root, name)
        try:
            if os.stat(folder, follow_symlinks=False).st_uid != os.getuid() or os.path.islink(folder):
                continue
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, another user's
        return True
    return True
