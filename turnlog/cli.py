"""The `turnlog` command: thin click functions that parse, call the public API and print.

Every command prints a readable table by default and JSON with --json. A usage mistake exits
with code 2, a runtime failure with code 1; either way the error is one line, never a traceback.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any, Callable, Sequence

import click
import orjson

from . import api
from .domain.keys import resolve_routing_key
from .domain.source import SessionSource
from .errors import InvalidRequest, TurnlogError

DB_HELP = f"Database: an SQLite path or a postgresql:// URL (env TURNLOG_DB; default ./{api.DEFAULT_DB})."


def echo_json(value: Any) -> None:
    # Non-str keys (a diff's deliveries are keyed by message seq) are written as strings.
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str).decode())


def echo_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    if not rows:
        click.echo("(none)")
        return
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    for r in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())


def write_output(text: str, output: str) -> None:
    """To stdout for "-", else to the file, replaced atomically (never half-written)."""
    if output == "-":
        click.echo(text)
    else:
        with click.open_file(output, "w", atomic=True) as f:
            f.write(text + "\n")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (dict, list)):
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()
    return str(value)


class TurnlogGroup(click.Group):
    """Turns turnlog's own errors into one line and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except InvalidRequest as e:
            raise click.UsageError(str(e), ctx) from None
        except TurnlogError as e:
            click.echo(f"Error: {e}", err=True)
            ctx.exit(1)
        except (click.exceptions.Exit, click.ClickException, click.Abort, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - the promise is: no traceback, one line
            if os.environ.get("TURNLOG_DEBUG"):
                raise
            click.echo(f"Error: {type(e).__name__}: {e} (set TURNLOG_DEBUG=1 for the traceback)", err=True)
            ctx.exit(1)


@click.group(cls=TurnlogGroup)
@click.option("--db", envvar="TURNLOG_DB", default=api.DEFAULT_DB, show_default=True, help=DB_HELP)
@click.option("--views", envvar="TURNLOG_VIEWS", default=None,
              help="Read-model SQLite file (only needed with a PostgreSQL log).")
@click.version_option(package_name="turnlog")
@click.pass_context
def main(ctx: click.Context, db: str, views: str | None) -> None:
    """turnlog: the event-sourced session engine of a multi-platform agent gateway.

    Every session operation is an event in one log; the routing map, sessions and the audit
    timeline are projections rebuilt from it.
    """
    ctx.obj = {"db": db, "views": views}


def engine(ctx: click.Context, **options: Any) -> api.Turnlog:
    obj = ctx.find_root().obj
    if "engine" not in obj:
        obj["engine"] = api.Turnlog(obj["db"], views=obj["views"], **options)
        ctx.call_on_close(obj["engine"].close)
    return obj["engine"]


def source_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--platform", required=True, help="telegram, discord, slack, whatsapp, feishu, weixin, ..."),
        click.option("--chat-type", default="dm", show_default=True, help="dm, group, channel, thread, or any other"),
        click.option("--chat-id", default="", help="Chat id (WhatsApp DM ids are canonicalised)."),
        click.option("--thread-id", default=None),
        click.option("--user-id", default=None),
        click.option("--user-id-alt", default=None, help="Stable alternate user id; wins over --user-id."),
        click.option("--scope-id", default=None, help="Workspace/guild scope (part of Slack keys)."),
        click.option("--chat-name", default=None),
        click.option("--user-name", default=None),
        click.option("--profile", default=None, help="Multiplex profile (namespace agent:<profile>)."),
        click.option("--message-id", default=None, help="The inbound message id (recorded as the cause)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def make_source(options: dict[str, Any]) -> SessionSource:
    fields = {k: options.pop(k) for k in list(options) if k in _SOURCE_FIELDS}
    try:
        return SessionSource(**fields)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="source") from None


_SOURCE_FIELDS = ("platform", "chat_type", "chat_id", "thread_id", "user_id", "user_id_alt", "scope_id",
                  "chat_name", "user_name", "profile", "message_id")


@main.command()
@source_options
@click.option("--group-per-user/--no-group-per-user", default=True, show_default=True)
@click.option("--thread-per-user/--no-thread-per-user", default=False, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def key(as_json: bool, group_per_user: bool, thread_per_user: bool, **options: Any) -> None:
    """Print the session key of a source (no database needed)."""
    source = make_source(options)
    rk = resolve_routing_key(source, group_sessions_per_user=group_per_user,
                             thread_sessions_per_user=thread_per_user, profile=source.profile)
    if as_json:
        echo_json({"session_key": rk.key, "shared": rk.shared, "route_id": str(rk.route_id)})
    else:
        click.echo(rk.key)
        click.echo(f"shared: {'yes' if rk.shared else 'no'}")


@main.command()
@source_options
@click.option("--force-new", is_flag=True, help="Always start a new session for the key.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def route(ctx: click.Context, force_new: bool, as_json: bool, **options: Any) -> None:
    """Route one message: get or create the session of a source."""
    source = make_source(options)
    result = engine(ctx).get_or_create_session(source, force_new=force_new, actor="cli" if not source.user_id else None)
    if as_json:
        echo_json(result.to_dict())
        return
    click.echo(f"session_key: {result.session_key}")
    click.echo(f"session_id:  {result.session_id}")
    click.echo(f"created:     {'yes' if result.created else 'no'}" + (f" ({result.reason})" if result.reason else ""))


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def sessions(ctx: click.Context, as_json: bool) -> None:
    """List every session with its flags."""
    rows = engine(ctx).sessions()
    if as_json:
        echo_json(rows)
    else:
        for r in rows:
            r["state"] = _state(r)
        echo_table(rows, ["session_id", "session_key", "state", "created_reason", "updated_at"])


def _state(row: dict[str, Any]) -> str:
    if row["end_reason"]:
        return f"ended:{row['end_reason']}"
    if row["suspended"]:
        return "suspended"
    if row["resume_pending"]:
        return f"resume_pending:{row['resume_reason']}"
    return "active" if row["routed"] else "unrouted"


@main.command()
@click.argument("key_or_session")
@click.option("--reason", default="operator", show_default=True)
@click.pass_context
def suspend(ctx: click.Context, key_or_session: str, reason: str) -> None:
    """Suspend a session: the next message on its key starts a new one."""
    changed = engine(ctx).suspend(key_or_session, reason, actor="cli", cause="cli:suspend")
    click.echo("suspended" if changed else "already suspended or ended: nothing changed")


@main.command("resume-pending")
@click.argument("key_or_session")
@click.option("--reason", default="restart_timeout", show_default=True)
@click.option("--clear", is_flag=True, help="Clear the marker instead of setting it.")
@click.pass_context
def resume_pending(ctx: click.Context, key_or_session: str, reason: str, clear: bool) -> None:
    """Mark (or --clear) a session as interrupted and waiting to be resumed."""
    t = engine(ctx)
    if clear:
        changed = t.clear_resume_pending(key_or_session, actor="cli", cause="cli:resume-pending")
    else:
        changed = t.mark_resume_pending(key_or_session, reason, actor="cli", cause="cli:resume-pending")
    click.echo("changed" if changed else "nothing changed")


@main.command()
@click.argument("key")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def switch(ctx: click.Context, key: str, session_id: str, as_json: bool) -> None:
    """Point routing KEY at an existing SESSION_ID (the previous session ends: session_switch)."""
    result = engine(ctx).switch_session(key, session_id, actor="cli", cause="cli:switch")
    if result is None:
        raise click.ClickException(f"no routing key {key!r}")
    if as_json:
        echo_json(result.to_dict())
    else:
        click.echo(f"{result.session_key} -> {result.session_id}")


@main.command("export-routing")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default="-", show_default=True)
@click.pass_context
def export_routing(ctx: click.Context, output: str) -> None:
    """Write the routing map as Hermes-compatible sessions.json."""
    write_output(orjson.dumps(engine(ctx).export_routing(), option=orjson.OPT_INDENT_2).decode(), output)


@main.command()
@click.argument("key_or_session")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def show(ctx: click.Context, key_or_session: str, as_json: bool) -> None:
    """A session's flags, lease holder and transcript."""
    data = engine(ctx).show(key_or_session)
    if as_json:
        echo_json(data)
        return
    for name in ("session_id", "session_key", "created_at", "updated_at", "created_reason", "parent_session_id"):
        click.echo(f"{name + ':':<19}{_cell(data.get(name))}")
    click.echo(f"{'state:':<19}{_state(data)}")
    lease = data["lease"]
    click.echo(f"{'lease:':<19}" + (f"epoch {lease['epoch']} held by {lease['owner']} until {lease['expires_at']}"
                                    if lease else "free"))
    click.echo("")
    echo_table(data["messages"], ["seq", "timestamp", "role", "epoch", "content"])


@main.command()
@click.option("--status", type=click.Choice(["pending", "attempting", "delivered", "failed", "abandoned"]))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def ledger(ctx: click.Context, status: str | None, as_json: bool) -> None:
    """The delivery ledger: every reply owed, its state and attempts."""
    rows = engine(ctx).ledger(status)
    if as_json:
        echo_json(rows)
    else:
        for r in rows:
            r["content"] = r["content"][:40] + ("…" if len(r["content"]) > 40 else "")
        echo_table(rows, ["session_id", "seq", "platform", "chat_id", "state", "attempts", "owner", "content"])


@main.command()
@click.argument("key")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def queue(ctx: click.Context, key: str, as_json: bool) -> None:
    """Inbound items waiting (or running) for a routing key, oldest first."""
    rows = engine(ctx).queue(key)
    if as_json:
        echo_json(rows)
    else:
        echo_table(rows, ["item_id", "kind", "state", "accepted_at", "text"])
        click.echo(f"depth: {sum(1 for r in rows if r['state'] == 'pending')}")


@main.command("ingest")
@click.argument("file", type=click.File("rb"))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--gateway", default="ingest", show_default=True,
              help="The gateway name this replay boots as (concurrent ingests need one each).")
@click.option("--progress-every", type=click.IntRange(min=0), default=1000, show_default=True,
              help="A progress line on stderr every N lines (0: none).")
@click.pass_context
def ingest_command(ctx: click.Context, file: Any, as_json: bool, gateway: str, progress_every: int) -> None:
    """Replay JSONL gateway traffic (FILE, or - for stdin) through the engine.

    \b
    One JSON object a line:
      {"op": "message", "source": {...}, "text": "hi", "message_id": "m1",
       "at": "2026-11-01T10:00:00Z", "reply": "hello!"}
      {"op": "command", "source": {...}, "text": "/new", "message_id": "c1"}
    \b
    source    a SessionSource: platform, chat_type, chat_id, user_id, thread_id, ...
    text      the message, or the slash command (/new /reset /stop /queue TEXT /resume ID)
    message_id  optional: the platform's id; a record without one is identified by its content
    at        optional ISO time with a zone: the record's clock (default: now)
    reply     optional: the reply given; a message with one runs a whole turn, without one it
              stays queued (and is answered by the next turn on its key)

    Lines are applied as they arrive (a pipe or FIFO streams). A bad line is reported with its
    number and skipped; the rest is applied. Re-running a file (or an overlapping one after a
    kill) duplicates nothing: each message is accepted once per routing key by its message_id.
    The replay boots as a gateway, so a killed one is recovered by the next ingest or by
    `turnlog recover --gateway ingest`. Exit code 1 if any line failed or a reply was not recorded.
    """
    from .ingest import ReplayClock, ingest, read_lines

    clock = ReplayClock()
    t = engine(ctx, clock=clock)

    def progress(report: Any) -> None:
        if progress_every and report.lines % progress_every == 0:
            click.echo(f"ingest: {report.lines} lines, {report.applied} applied, {len(report.errors)} failed",
                       err=True)

    report = ingest(t, clock, read_lines(file), gateway=gateway, on_line=progress)
    for line_no, error in report.errors:
        click.echo(f"line {line_no}: {error}", err=True)
    for line_no, reason in report.unrecorded:
        click.echo(f"line {line_no}: reply not recorded: {reason}", err=True)
    if as_json:
        echo_json(report.to_dict())
    else:
        click.echo(f"{report.applied} records applied ({report.turns} turns, {report.commands} commands,"
                   f" {report.queued} queued, {report.duplicates} duplicates), {len(report.errors)} failed"
                   + (f", {len(report.unrecorded)} replies not recorded" if report.unrecorded else ""))
    if report.errors or report.unrecorded:
        ctx.exit(1)


@main.command()
@click.option("--sessions", "-S", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--turns", "-T", type=click.IntRange(min=1), default=25, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Keep the benchmark database here (default: a temporary folder, deleted).")
@click.option("--json", "as_json", is_flag=True)
def bench(sessions: int, turns: int, seed: int, workdir: str | None, as_json: bool) -> None:
    """Run the standard gateway workload (shared/bench/WORKLOAD.md) and print its figures."""
    from .bench import run_bench

    show_bar = sys.stderr.isatty() and not as_json
    with click.progressbar(length=sessions * turns, label="turns", file=sys.stderr, hidden=not show_bar) as bar:
        done = [0]

        def progress(n: int, total: int) -> None:
            bar.update(n - done[0])
            done[0] = n

        try:
            result = run_bench(sessions, turns, seed, workdir=workdir, progress=progress)
        except ValueError as e:
            raise click.UsageError(str(e)) from None
    if as_json:
        echo_json(result)
        return
    lat = result["turn_latency_ms"]
    click.echo(f"{result['turns_done']} turns on {sessions} sessions: {result['turns_per_s']} turns/s,"
               f" p50 {lat['p50']} ms, p99 {lat['p99']} ms")
    click.echo(f"restart (load every session and transcript): {result['restart']['load_s']} s")
    click.echo(f"projections rebuild: {result['projections_rebuild']['seconds']} s"
               f" ({result['projections_rebuild']['events_per_s']} events/s)")
    click.echo(f"bytes after workload: {result['bytes_after_workload']}")


@main.command()
@click.option("--gateway", "name", default="main", show_default=True, help="Gateway name.")
@click.option("--dry-run", is_flag=True, help="Report what recovery would do; change nothing.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def recover(ctx: click.Context, name: str, dry_run: bool, as_json: bool) -> None:
    """Recover the unclean boots of a gateway: interrupted turns, owed replies, stuck loops.

    Replies are delivered by the gateway's own ledger sweep when it starts; this command records
    what recovery decides (or, with --dry-run, only prints it).
    """
    report = engine(ctx).recover(name, dry_run=dry_run)
    if as_json:
        echo_json(report.to_dict())
        return
    verb = "would recover" if dry_run else "recovered"
    click.echo(f"{verb} {len(report.recovered_boots)} unclean boot(s) of gateway {name}")
    echo_table([t.to_dict() for t in report.interrupted], ["session_id", "session_key", "epoch", "boot_id", "action"])


@main.command()
@click.option("--gateway", "name", default="main", show_default=True, help="Gateway name.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def status(ctx: click.Context, name: str, as_json: bool) -> None:
    """Last boot and whether it ended clean, active turns, owed replies, interrupted and suspended sessions."""
    data = engine(ctx).status(name)
    if as_json:
        echo_json(data)
        return
    boot = data["last_boot"]
    if boot is None:
        click.echo(f"gateway {name}: never started")
    else:
        ended = {True: "ended clean", False: "ended UNCLEAN", None: boot["state"]}[boot["ended_clean"]]
        if boot["state"] in ("running", "draining") and not boot["recovered"]:
            ended = f"{boot['state']} (or died without a stop: `turnlog recover` tells)"
        click.echo(f"gateway {name}: last boot {boot['boot_id']} (pid {boot['pid']} on {boot['host']}),"
                   f" started {boot['started_at']}, {ended}")
    for title, rows, columns in (
            ("active turns", data["active_turns"], ["session_id", "owner", "epoch", "expires_at"]),
            ("pending deliveries", data["pending_deliveries"], ["session_id", "seq", "platform", "state", "attempts"]),
            ("resume_pending", data["resume_pending"], ["session_id", "session_key", "resume_reason"]),
            ("suspended", data["suspended"], ["session_id", "session_key", "suspend_reason"])):
        click.echo(f"\n{title}: {len(rows)}")
        if rows:
            echo_table(rows, columns)


@main.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Run a scripted multi-platform scenario on a fresh database and show what the log holds."""
    from .demo import run_demo

    db = ctx.find_root().obj["db"]
    if ctx.find_root().get_parameter_source("db") == click.core.ParameterSource.DEFAULT:
        db = os.path.join(tempfile.mkdtemp(prefix="turnlog-demo-"), "demo.db")
    elif os.path.exists(db):
        raise click.UsageError(f"the demo needs a fresh database; {db} exists")
    run_demo(db, click.echo, echo_table)


__all__ = ["main"]


from . import cli_audit  # noqa: E402,F401  (registers history, at, diff, export, fork)
from . import cli_projections  # noqa: E402,F401  (registers search, rebuild, verify, doctor)
