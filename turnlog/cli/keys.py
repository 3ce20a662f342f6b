"""--key filters: a key string or a route id, and a note when a key string names several routes."""

from __future__ import annotations

import click

from .. import Turnlog
from .output import visible


def key_filter(t: Turnlog, value: str | None) -> str | None:
    """The key string that read models filter by, for a --key given as a key string or a route id.

    Filters match key strings, so when the string names several routes (ids holding ':') every one
    of them is shown, and a note on stderr names them."""
    if value is None:
        return None
    routes = t.routes()
    key = next((r.session_key for r in routes if r.route_id == value), value)
    ids = sorted(r.route_id for r in routes if r.session_key == key)
    if len(ids) > 1:
        click.echo(f"note: routing key {visible(key)!r} names {len(ids)} routes ({', '.join(ids)});"
                   " this filter shows them all", err=True)
    return key


__all__ = ["key_filter"]
