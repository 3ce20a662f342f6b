"""Opening the database the viewer shows, without ever writing to it.

The ONE place that opens the store for the viewer. Until `Turnlog(location, read_only=True)`
exists, the viewer reads a private snapshot: the file is copied through SQLite's backup API from
a connection that cannot write (mode=ro while a writer's WAL is present, otherwise immutable=1 so
that SQLite creates no -wal/-shm beside it), and Turnlog opens the copy, where catching up the
read models is harmless. Swap the body for the read-only Turnlog at merge.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import weakref
from contextlib import closing
from urllib.parse import quote

from ..api import Turnlog
from ..errors import InvalidRequest, NotFound, TurnlogError


def open_read_only(path: str) -> Turnlog:
    if "://" in path and not path.startswith("sqlite://"):
        raise InvalidRequest(f"turnlog web reads an SQLite file, not {path!r}")
    source = os.path.abspath(path.removeprefix("sqlite://"))
    if not os.path.isfile(source):
        raise NotFound(f"no database file {source}")
    mode = "mode=ro" if os.path.exists(source + "-wal") else "immutable=1"
    folder = tempfile.mkdtemp(prefix="turnlog-web-")
    copy = os.path.join(folder, "snapshot.db")
    try:
        with closing(sqlite3.connect(f"file:{quote(source)}?{mode}", uri=True)) as src, \
                closing(sqlite3.connect(copy)) as dest:
            src.backup(dest)
        t = Turnlog(copy, owner="web")
    except (sqlite3.Error, OSError) as e:
        shutil.rmtree(folder, ignore_errors=True)
        raise InvalidRequest(f"cannot read {source}: {e}") from None
    except TurnlogError as e:  # e.g. not a turnlog database: say so of the user's file, not the copy
        shutil.rmtree(folder, ignore_errors=True)
        raise type(e)(str(e).replace(copy, source)) from None
    weakref.finalize(t, shutil.rmtree, folder, True)
    return t
