"""Giving the space of removed rows back to the file system without an in-place VACUUM.

An in-place VACUUM rewrites every page of the file, which breaks Litestream-style replication
of the WAL. A database made by this turnlog has `auto_vacuum=INCREMENTAL` (dbfile.create), so
`PRAGMA incremental_vacuum` moves the free pages to the end and truncates them away, through
the WAL like any write; a checkpoint then shrinks the main file. An older file (auto_vacuum
off) keeps its free pages for reuse until `compact_offline` (VACUUM INTO a new file + swap,
refused while the database is in use) gives them back.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import StoreError
from . import dbfile
from .backup import beside, check, fsync_file, fsync_folder, refuse_if_in_use

INCREMENTAL = 2
CHECKPOINT_TRIES = 3


@dataclass(frozen=True)
class Reclaimed:
    path: str
    bytes_before: int
    bytes_after: int
    incremental: bool  # the file reclaims space by itself (else: `turnlog compact-file`, offline)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def file_bytes(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def reclaim(path: str) -> Reclaimed:
    """Free pages given back (incremental vacuum, then a truncating checkpoint)."""
    before = file_bytes(path)
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        incremental = conn.execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL
        if incremental:
            conn.executescript("PRAGMA incremental_vacuum;")  # run to the end: a plain execute steps once (one page)
        for _ in range(CHECKPOINT_TRIES):  # a reader mid-snapshot holds a checkpoint back: once it is done
            if conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0:
                break
    finally:
        conn.close()
    return Reclaimed(path, before, file_bytes(path), incremental)


def compact_offline(path: str) -> Reclaimed:
    """Rewrite the database into a new file (VACUUM INTO, with auto_vacuum=INCREMENTAL so that it
    reclaims space by itself from now on), check it, and swap it in; refused while in use, and
    for a file that is not a turnlog database (never rewritten)."""
    dbfile.prepare(path, read_only=False, create_missing=False)
    refuse_if_in_use(path)
    before = file_bytes(path)
    tmp = beside(path, "compacting")
    try:
        conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")  # applies to the VACUUM INTO target
            conn.execute("VACUUM INTO ?", (tmp,))
        finally:
            conn.close()
        if not check(tmp).chain_ok:
            raise StoreError(f"the compacted copy of {path} does not verify: the database was left as it was")
        fsync_file(tmp)
        refuse_if_in_use(path)
        os.replace(tmp, path)
        fsync_folder(path)
        for suffix in ("-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return Reclaimed(path, before, file_bytes(path), True)
