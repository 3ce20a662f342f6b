"""Reads of the route history (`route_history`: route_history.py): the routing map at a moment."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from .base import TypedRow


@dataclass(frozen=True)
class BoundRoute(TypedRow):
    route_id: str
    session_key: str
    session_id: str | None
    bound_reason: str | None
    from_position: int


def routes_at(db: sqlite3.Connection, position: int, key: str | None = None) -> list[BoundRoute]:
    """Each route's binding in force at log position `position` (only `key`'s, if given)."""
    where = " AND session_key=?" if key else ""
    params: tuple[Any, ...] = (position, position, *((key,) if key else ()))
    return [BoundRoute(*r) for r in db.execute(
        "SELECT route_id, session_key, session_id, reason AS bound_reason, from_position FROM route_history"
        f" WHERE from_position<=? AND (to_position IS NULL OR to_position>?){where}"
        " ORDER BY session_key, route_id", params)]
