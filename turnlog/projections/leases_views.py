"""Reads of the turn leases' table (`leases`: leases.py), as typed rows. Each function only reads
the read-model connection it is given."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Iterable

from .base import TypedRow


@dataclass(frozen=True)
class LeaseRow(TypedRow):
    """A held turn lease: who holds it, under which epoch, until when."""
    session_id: str
    owner: str
    owner_key: str | None
    epoch: int
    turn_id: str | None
    acquired_at: str | None
    expires_at: str | None


def held_leases(db: sqlite3.Connection) -> list[LeaseRow]:
    return [LeaseRow(*r) for r in db.execute(
        "SELECT session_id, owner, owner_key, epoch, turn_id, acquired_at, expires_at FROM leases"
        " WHERE owner IS NOT NULL ORDER BY acquired_at")]


def sessions_held_by(db: sqlite3.Connection, owners: Iterable[str]) -> list[str]:
    owners = list(owners)
    if not owners:
        return []
    marks = ",".join("?" * len(owners))
    return [r[0] for r in db.execute(
        f"SELECT session_id FROM leases WHERE owner IN ({marks}) ORDER BY session_id", owners)]
