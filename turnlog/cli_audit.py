"""Audit and time-travel commands: history, at, diff, export, fork (registered on `turnlog`)."""

from __future__ import annotations

from typing import Any

import click

from .cli import _cell, echo_json, echo_table, engine, main, write_output
from .export import FORMATS, render
from .timetravel import AsOf

EVENT_HELP = "Only these event names (repeatable), e.g. --type RouteBound --type SessionEnded."


@main.command()
@click.argument("key_or_session")
@click.option("--since", default=None, help="ISO time or log position #N (inclusive).")
@click.option("--until", default=None, help="ISO time or log position #N (inclusive).")
@click.option("--type", "types", multiple=True, help=EVENT_HELP)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def history(ctx: click.Context, key_or_session: str, since: str | None, until: str | None,
            types: tuple[str, ...], as_json: bool) -> None:
    """The audit timeline of a routing key or a session: every event, who did it and why."""
    entries = [e.to_dict() for e in engine(ctx).history(key_or_session, since=since, until=until, types=types)]
    if as_json:
        echo_json(entries)
    else:
        echo_table(entries, ["position", "at", "event", "actor", "cause", "session_id", "summary"])


@main.command()
@click.argument("when")
@click.argument("view", type=click.Choice(list(AsOf.VIEWS)), default="routes")
@click.option("--key", default=None, help="Only this routing key.")
@click.option("--session", default=None, help="Only this session.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def at(ctx: click.Context, when: str, view: str, key: str | None, session: str | None, as_json: bool) -> None:
    """The state as it was at WHEN (an ISO time or a log position #N): routes, sessions, leases,
    ledger, queue or transcript."""
    moment = engine(ctx).at(when)
    rows = moment.view(view, key=key, session=session)
    if as_json:
        echo_json({"position": moment.position, "at": moment.at, view: rows})
        return
    click.echo(f"as of #{moment.position} ({moment.at or 'the beginning'}):")
    if rows:
        echo_table(rows, list(rows[0].keys()))
    else:
        click.echo("(none)")


@main.command()
@click.argument("a")
@click.argument("b")
@click.option("--key", default=None, help="Only this routing key.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def diff(ctx: click.Context, a: str, b: str, key: str | None, as_json: bool) -> None:
    """What changed between moments A and B (ISO times or #N), by routing key and by session."""
    result = engine(ctx).diff(a, b, key=key)
    if as_json:
        echo_json(result)
        return
    click.echo(f"#{result['from']} -> #{result['to']}: {result['events']} events")
    for name, changes in result["keys"].items():
        for c in changes:
            click.echo(f"  key {name}: {c['change']} {_cell(c['from_session'])} -> {_cell(c['to_session'])}"
                       f" ({_cell(c['reason'])})")
    for session_id, change in result["sessions"].items():
        click.echo(f"  session {session_id}:")
        for part, value in change.items():
            click.echo(f"    {part}: {_cell(value)}")


@main.command()
@click.argument("key_or_session")
@click.option("--lineage", is_flag=True, help="Follow compression rotations from the root to the tip.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="json", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default="-", show_default=True)
@click.pass_context
def export(ctx: click.Context, key_or_session: str, lineage: bool, fmt: str, output: str) -> None:
    """Export a session (Hermes-compatible JSON, JSONL or Markdown)."""
    write_output(render(engine(ctx).export(key_or_session, lineage=lineage), fmt), output)


@main.command()
@click.argument("session_id")
@click.option("--at", "when", required=True, help="Log position #N (or ISO time) to fork at.")
@click.option("--to-key", default=None, help="Point this routing key at the fork.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def fork(ctx: click.Context, session_id: str, when: str, to_key: str | None, as_json: bool) -> None:
    """Make a new session whose transcript is SESSION_ID's up to --at."""
    t = engine(ctx)
    fork_id = t.fork(session_id, when, to_key=to_key, actor="cli")
    data: dict[str, Any] = {"session_id": fork_id, "parent_session_id": session_id,
                            "messages": len(t.transcript(fork_id))}
    if as_json:
        echo_json(data)
    else:
        click.echo(f"forked {session_id} at {when} -> {fork_id} ({data['messages']} messages)")
