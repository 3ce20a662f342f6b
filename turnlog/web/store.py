"""Opening the database the viewer shows, without ever writing to it.

The ONE place that opens the store for the viewer. Until `Turnlog(location, read_only=True)`
exists, the viewer reads a private snapshot: the file is copied through SQLite's backup API from
a connection that cannot write (mode=ro while a writer's WAL is present, otherwise immutable=1 so
that SQLite creates no -wal/-shm beside it), and Turnlog opens the copy, where catching up the
read models is harmless. Swap the body for the read-only Turnlog at merge.

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
_OWNED = re.compile(re.escape(PREFIX) + r"(\d+)-")


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
    mode = "mode=ro" if os.path.exists(source + "-wal") else "immutable=1"
    folder = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")  # mkdtemp: mode 0700
    copy = os.path.join(folder, "snapshot.db")
    try:
        # Created before SQLite opens it, so it is never readable by others, not even briefly;
        # SQLite gives its -wal and -shm the same mode.
        os.close(os.open(copy, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        with closing(sqlite3.connect(f"file:{quote(source)}?{mode}", uri=True)) as src, \
                closing(sqlite3.connect(copy)) as dest:
            src.backup(dest)
        _copy_key_file(source, copy)
        t = Turnlog(copy, owner="web")
    except (sqlite3.Error, OSError) as e:
        shutil.rmtree(folder, ignore_errors=True)
        raise InvalidRequest(f"cannot read {source}: {e}") from None
    except TurnlogError as e:  # e.g. not a turnlog database: say so of the user's file, not the copy
        shutil.rmtree(folder, ignore_errors=True)
        raise type(e)(str(e).replace(copy, source)) from None
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return Copy(t, folder)


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
