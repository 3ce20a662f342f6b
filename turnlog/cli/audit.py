"""Audit and time-travel commands: history, at, diff, export, fork (registered on `turnlog`)."""

from __future__ import annotations

from typing import Any

import click

from .base import cell, command, echo_table, engine, write_output
from .keys import key_filter
from .output import Output, limit_option, output_options
from .. import EXPORT_FORMATS, AsOf, render_export

EVENT_HELP = "Only these event names (repeatable), e.g. --type RouteBound --type SessionEnded."


@command()
@click.argument("key_or_session")
@click.option("--since", default=None, help="ISO time or log position #N (inclusive).")
@click.option("--until", default=None, help="ISO time or log position #N (inclusive).")
@click.option("--type", "types", multiple=True, help=EVENT_HELP)
@limit_option
@output_options
@click.pass_context
def history(ctx: click.Context, key_or_session: str, since: str | None, until: str | None,
            types: tuple[str, ...], out: Output, limit: int | None) -> None:
    """The audit timeline of a routing key (a key string or a route id) or a session: every event,
    who did it and why."""
    entries = [e.to_dict() for e in engine(ctx).history(key_or_session, since=since, until=until, types=types)]
    out.rows(entries[:limit], ["position", "at", "event", "actor", "cause", "session_id", "summary"])


@command()
@click.argument("when")
@click.argument("view", type=click.Choice(list(AsOf.VIEWS)), default="routes")
@click.option("--key", default=None, help="Only this routing key (a key string or a route id).")
@click.option("--session", default=None, help="Only this session.")
@output_options
@click.pass_context
def at(ctx: click.Context, when: str, view: str, key: str | None, session: str | None, out: Output) -> None:
    """The state as it was at WHEN (an ISO time or a log position #N): routes, sessions, leases,
    ledger, queue or transcript. --nl/--csv: the view's rows."""
    t = engine(ctx)
    moment = t.at(when)
    rows = moment.view(view, key=key_filter(t, key), session=session)

    def text() -> None:
        out.line(f"as of #{moment.position} ({moment.at or 'the beginning'}):")
        echo_table(rows, list(rows[0].keys()) if rows else [])
    out.record({"position": moment.position, "at": moment.at, view: rows}, text, rows=rows)


@command()
@click.argument("a")
@click.argument("b")
@click.option("--key", default=None, help="Only this routing key (a key string or a route id).")
@output_options
@click.pass_context
def diff(ctx: click.Context, a: str, b: str, key: str | None, out: Output) -> None:
    """What changed between moments A and B (ISO times or #N), by routing key and by session.

    Changes always read from the earlier moment to the later one: when A is after B, a note on
    stderr says so."""
    t = engine(ctx)
    first, second = t.at(a).position, t.at(b).position
    if first > second:
        out.line(f"note: A ({a} = #{first}) is after B ({b} = #{second}): showing the changes from"
                 f" #{second} to #{first}", err=True)
    result = t.diff(a, b, key=key_filter(t, key))

    def text() -> None:
        out.line(f"#{result['from']} -> #{result['to']}: {result['events']} events")
        for name, changes in result["keys"].items():
            for c in changes:
                out.line(f"  key {cell(name)}: {c['change']} {cell(c['from_session'])} -> {cell(c['to_session'])}"
                         f" ({cell(c['reason'])})")
        for session_id, change in result["sessions"].items():
            out.line(f"  session {cell(session_id)}:")
            for part, value in change.items():
                out.line(f"    {part}: {cell(value)}")
    out.record(result, text)


@command()
@click.argument("key_or_session")
@click.option("--lineage", is_flag=True, help="Follow compression rotations from the root to the tip.")
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), default="json", show_default=True,
              help="The document's format: Hermes JSON, JSONL (one message a line) or Markdown.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default="-", show_default=True,
              help="Write to this file (- for stdout); an existing file needs --force, a link is refused.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@output_options
@click.pass_context
def export(ctx: click.Context, key_or_session: str, lineage: bool, fmt: str, output: str, force: bool,
           out: Output) -> None:
    """Export a session (Hermes-compatible JSON, JSONL or Markdown).

    --format chooses the document. With -o FILE, the output options print what was written
    (nothing for the table format); with --nl or --csv and no -o, the session's messages."""
    document = engine(ctx).export(key_or_session, lineage=lineage)
    if output == "-" and out.fmt in ("nl", "csv"):
        out.rows(document["messages"], [])  # each message names its session_id
        return
    text = render_export(document, fmt)
    write_output(text, output, force=force)
    if output != "-" and not out.is_table:
        out.record({"output": output, "format": fmt, "bytes": len((text + "\n").encode())})


@command(writes=True)
@click.argument("session_id")
@click.option("--at", "when", required=True, help="Log position #N (or ISO time) to fork at.")
@click.option("--to-key", default=None, help="Point this routing key at the fork.")
@output_options
@click.pass_context
def fork(ctx: click.Context, session_id: str, when: str, to_key: str | None, out: Output) -> None:
    """Make a new session whose transcript is SESSION_ID's up to --at."""
    t = engine(ctx)
    fork_id = t.fork(session_id, when, to_key=to_key, actor="cli")
    data: dict[str, Any] = {"session_id": fork_id, "parent_session_id": session_id,
                            "messages": len(t.transcript(fork_id))}
    out.record(data, lambda: out.line(f"forked {session_id} at {when} -> {fork_id} ({data['messages']} messages)"))


COMMANDS = (history, at, diff, export, fork)
