"""The local SQLite file a database location is read from, and whether this process may write
it: what a tool asks before it opens a database that it must only read when it cannot write
(`turnlog`'s read commands open such a file read-only instead of failing)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import dbfile
from .store import parse_location


@dataclass(frozen=True)
class LocalFile:
    """`path` holds the log itself (`holds_log`: an SQLite location) or, with a PostgreSQL log,
    the read models kept beside it."""
    path: str
    holds_log: bool

    def writable(self) -> bool:
        """Whether turnlog may write the file and the -wal/-shm beside it (permission bits are
        honoured even for root: a file marked read-only is read-only for everyone)."""
        return dbfile.writable(self.path)


def local_file(location: str | os.PathLike[str], views: str | None = None) -> LocalFile:
    """The local file of `location` (an SQLite path or a postgresql:// URL with its `views` file)."""
    parsed = parse_location(location, views)
    if parsed.kind == "sqlite":
        return LocalFile(parsed.env["SQLITE_DBNAME"], holds_log=True)
    return LocalFile(parsed.views_path, holds_log=False)
