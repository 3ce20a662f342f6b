"""Key strings that name more than one route.

A route is identified by its key's parts, so chat `a:b` + user `c` and chat `a` + user `b:c` are two
routes; their Hermes key strings are the same (`...:a:b:c`). Where only the string can be written
(sessions.json), such a pair cannot be told apart: it is refused, naming the route ids.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping

from ..errors import AmbiguousKey
from .source import quoted


def colliding_keys(routes: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """key string -> its route ids, for every key string held by more than one route."""
    by_key: dict[str, list[str]] = defaultdict(list)
    for route in routes:
        by_key[route["session_key"]].append(str(route["route_id"]))
    return {key: sorted(ids) for key, ids in by_key.items() if len(ids) > 1}


def refuse_colliding_keys(routes: Iterable[Mapping[str, Any]]) -> None:
    collisions = colliding_keys(routes)
    if collisions:
        key, ids = next(iter(sorted(collisions.items())))
        more = f" (and {len(collisions) - 1} more key(s))" if len(collisions) > 1 else ""
        raise AmbiguousKey(f"routing key {quoted(key)} names {len(ids)} routes ({', '.join(ids)}){more}:"
                           " sessions.json can hold only one of them")


__all__ = ["colliding_keys", "refuse_colliding_keys"]
