"""The local SQLite file a database location is read from, and whether this process may write
it: what a tool asks before it opens a database that it must only read when it cannot write
(`turnlog`'s read commands open such a file read-only instead of failing). The public face of
the backend's own answers (storage/backend.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .backend import Backend, create
from .dbfile import REBUILD_LOCK
from .keys import key_file
from .sqlite_backend import SqliteBackend


@dataclass(frozen=True)
class LocalFile:
    """`path` holds the log itself (`holds_log`: an SQLite location) or, with a PostgreSQL log,
    the read models kept beside it."""
    path: str
    holds_log: bool
    backend: Backend = field(repr=False, compare=False)

    def writable(self) -> bool:
        """Whether turnlog may write the file and the -wal/-shm beside it (permission bits are
        honoured even for root: a file marked read-only is read-only for everyone)."""
        return self.backend.writable()

    def has_log(self) -> bool:
        """Whether the log exists yet (an SQLite file not made yet has none)."""
        return self.backend.has_log()

    def files(self) -> tuple[str, ...]:
        """The files of this database on disk, present or not: the SQLite file, the
        -journal/-wal/-shm SQLite keeps beside it, the lock of a rebuild of the read models kept
        in it and the key file of encryption at rest."""
        return (self.path, self.path + "-journal", self.path + "-wal", self.path + "-shm", self.path + REBUILD_LOCK,
                key_file(self.path))


def local_file(location: str | os.PathLike[str], views: str | None = None) -> LocalFile:
    """The local file of `location` (an SQLite path or a postgresql:// URL with its `views` file)."""
    backend = create(location, views)
    return LocalFile(backend.local_file(), holds_log=isinstance(backend, SqliteBackend), backend=backend)
