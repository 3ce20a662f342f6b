"""The background delegations: `turnlog delegations` lists them (docs/behaviour.md §8a)."""

from __future__ import annotations

from typing import Any

import click

from .base import command, engine
from .output import Output, output_options

STATES = ("running", "stopped", "finished")


@command()
@click.option("--session", "session", default=None,
              help="Only this session's (a session id, or a routing key: its current session).")
@click.option("--state", type=click.Choice(STATES), default=None, help="Only those in this state.")
@output_options
@click.pass_context
def delegations(ctx: click.Context, session: str | None, state: str | None, out: Output) -> None:
    """Background delegations started from sessions, oldest first: their state, and once finished
    their status, summary and the wake-up item that reports it."""
    rows = [row.to_dict() for row in engine(ctx).delegations(session=session, state=state)]

    def prepare(rows: list[dict[str, Any]]) -> None:
        for r in rows:
            r["result"] = r["status"] or r["stop_reason"] or ""
            summary = r["summary"] or ""
            r["summary"] = summary[:40] + ("…" if len(summary) > 40 else "")
    out.rows(rows, ["handle", "session_id", "state", "result", "started_at", "description", "summary"], prepare)


COMMANDS = (delegations,)
