"""The core commands: keys and routes, sessions and their flags, the ledger and queue, ingest,
recovery, status, the benchmark and the demo."""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any, Callable

import click
import orjson

from .base import cell, command, echo_table, engine, visible, write_output
from .files import require_folder
from .output import Output, limit_option, output_options
from ..bench import GC_BETWEEN_TURNS, GC_MODES
from .. import AmbiguousKey, SessionOwnedElsewhere, SessionSource, resolve_routing_key


def source_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--platform", required=True, help="telegram, discord, slack, whatsapp, feishu, weixin, ..."),
        click.option("--chat-type", default="dm", show_default=True, help="dm, group, channel, thread, or any other."),
        click.option("--chat-id", default="", help="Chat id (WhatsApp DM ids are canonicalised)."),
        click.option("--thread-id", default=None, help="Thread or topic id inside the chat."),
        click.option("--user-id", default=None, help="The sender's platform user id."),
        click.option("--user-id-alt", default=None, help="Stable alternate user id; wins over --user-id."),
        click.option("--scope-id", default=None, help="Workspace/guild scope (part of Slack keys)."),
        click.option("--account-id", default=None,
                     help="The gateway's bot account the message arrived on (part of the key when given)."),
        click.option("--chat-name", default=None, help="Display name of the chat."),
        click.option("--user-name", default=None, help="Display name of the sender."),
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
                  "account_id", "chat_name", "user_name", "profile", "message_id")


@command()
@source_options
@click.option("--group-per-user/--no-group-per-user", default=True, show_default=True,
              help="In groups, each sender has a session of their own.")
@click.option("--thread-per-user/--no-thread-per-user", default=False, show_default=True,
              help="In threads, each sender has a session of their own.")
@output_options
def key(out: Output, group_per_user: bool, thread_per_user: bool, **options: Any) -> None:
    """Print the session key of a source (no database needed)."""
    source = make_source(options)
    rk = resolve_routing_key(source, group_sessions_per_user=group_per_user,
                             thread_sessions_per_user=thread_per_user, profile=source.profile)
    data = {"session_key": rk.key, "shared": rk.shared, "route_id": str(rk.route_id)}

    def text() -> None:
        out.line(rk.key)
        out.line(f"shared: {'yes' if rk.shared else 'no'}")
    out.record(data, text)


@command(writes=True)
@source_options
@click.option("--force-new", is_flag=True, help="Always start a new session for the key.")
@output_options
@click.pass_context
def route(ctx: click.Context, force_new: bool, out: Output, **options: Any) -> None:
    """Route one message: get or create the session of a source."""
    source = make_source(options)
    result = engine(ctx).get_or_create_session(source, force_new=force_new, actor="cli" if not source.user_id else None)

    def text() -> None:
        out.line(f"session_key: {result.session_key}")
        out.line(f"session_id:  {result.session_id}")
        out.line(f"created:     {'yes' if result.created else 'no'}" + (f" ({result.reason})" if result.reason else ""))
    out.record(result.to_dict(), text)


@command()
@click.option("--title", "title", default=None, help="Only sessions whose title contains this text (any case).")
@limit_option
@output_options
@click.pass_context
def sessions(ctx: click.Context, title: str | None, out: Output, limit: int | None) -> None:
    """List every session with its flags and title."""
    rows = [s.to_dict() for s in engine(ctx).sessions(title=title)[:limit]]

    def prepare(rows: list[dict[str, Any]]) -> None:
        for r in rows:
            r["state"] = _state(r)
    out.rows(rows, ["session_id", "session_key", "state", "created_reason", "updated_at", "title"], prepare)


def _state(row: dict[str, Any]) -> str:
    if row.get("archive_sha256"):
        return f"archived in {row['archive_file']} sha256 {row['archive_sha256'][:12]}…"
    if row["end_reason"]:
        return f"ended:{row['end_reason']}"
    if row["suspended"]:
        return "suspended"
    if row["resume_pending"]:
        return f"resume_pending:{row['resume_reason']}"
    return "active" if row["routed"] else "unrouted"


@command(writes=True)
@click.argument("key_or_session")
@click.option("--reason", default="operator", show_default=True, help="Why (recorded in the event).")
@output_options
@click.pass_context
def suspend(ctx: click.Context, key_or_session: str, reason: str, out: Output) -> None:
    """Suspend a session: the next message on its key starts a new one."""
    changed = engine(ctx).suspend(key_or_session, reason, actor="cli", cause="cli:suspend")
    out.record({"key_or_session": key_or_session, "suspended": True, "changed": changed},
               lambda: out.line("suspended" if changed else "already suspended or ended: nothing changed"))


@command("resume-pending", writes=True)
@click.argument("key_or_session")
@click.option("--reason", default="restart_timeout", show_default=True, help="Why (recorded in the event).")
@click.option("--clear", is_flag=True, help="Clear the marker instead of setting it.")
@output_options
@click.pass_context
def resume_pending(ctx: click.Context, key_or_session: str, reason: str, clear: bool, out: Output) -> None:
    """Mark (or --clear) a session as interrupted and waiting to be resumed."""
    t = engine(ctx)
    if clear:
        changed = t.clear_resume_pending(key_or_session, actor="cli", cause="cli:resume-pending")
    else:
        changed = t.mark_resume_pending(key_or_session, reason, actor="cli", cause="cli:resume-pending")
    out.record({"key_or_session": key_or_session, "resume_pending": not clear, "changed": changed},
               lambda: out.line("changed" if changed else "nothing changed"))


@command(writes=True)
@click.argument("key")
@click.argument("session_id")
@click.option("--force", is_flag=True, help="Take the session even if another routing key owns it.")
@output_options
@click.pass_context
def switch(ctx: click.Context, key: str, session_id: str, force: bool, out: Output) -> None:
    """Point routing KEY (a key string or a route id) at an existing SESSION_ID (the previous session
    ends: session_switch). A session that belongs to another key needs --force."""
    t = engine(ctx)
    try:
        result = t.switch_session(key, session_id, actor="cli", cause="cli:switch")
    except SessionOwnedElsewhere as e:
        if not force:
            raise click.ClickException(f"{visible(str(e))}: give --force to take it") from None
        click.echo(f"warning: {visible(str(e))}; taking it (--force)", err=True)
        result = t.switch_session(key, session_id, actor="cli", cause="cli:switch", force=True)
    if result is None:
        raise click.ClickException(f"no routing key {visible(key)!r}")
    out.record(result.to_dict(), lambda: out.line(f"{result.session_key} -> {result.session_id}"))


@command("export-routing")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default="-", show_default=True,
              help="Write to this file (- for stdout); an existing file needs --force, a link is refused.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@output_options
@click.pass_context
def export_routing(ctx: click.Context, output: str, force: bool, out: Output) -> None:
    """Write the routing map as Hermes-compatible sessions.json.

    With --nl or --csv, one line per route instead (fields of the sessions.json entry)."""
    try:
        data = engine(ctx).export_routing()
    except AmbiguousKey as e:  # the log is fine; sessions.json just cannot say it
        raise click.ClickException(visible(str(e))) from None
    if out.fmt in ("nl", "csv"):
        out.rows([{"session_key": k, **v} for k, v in data.items() if not k.startswith("_")], [])
        return
    write_output(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode(), output, force=force)


@command()
@click.argument("key_or_session")
@output_options
@click.pass_context
def show(ctx: click.Context, key_or_session: str, out: Output) -> None:
    """A session's flags, lease holder and transcript (--nl/--csv: the transcript's messages)."""
    t = engine(ctx)
    session = t.session(key_or_session)
    lease = t.turns.holder(session.session_id)
    data = {**session.to_dict(), "lease": lease.to_dict() if lease is not None else None,
            "messages": t.transcript(session.session_id)}

    def text() -> None:
        for name in ("session_id", "title", "session_key", "created_at", "updated_at", "created_reason",
                     "parent_session_id"):
            out.line(f"{name + ':':<19}{cell(data.get(name))}")
        out.line(f"{'state:':<19}{_state(data)}")
        lease = data["lease"]
        out.line(f"{'lease:':<19}" + (f"epoch {lease['epoch']} held by {lease['owner']} until {lease['expires_at']}"
                                      if lease else "free"))
        out.line("")
        fated = any(m["fate"] for m in data["messages"])  # the column once the history was edited
        echo_table(data["messages"], ["seq", "timestamp", "role", "epoch", *(["fate"] if fated else []), "content"])
    out.record(data, text, rows=data["messages"])


@command()
@click.argument("key")
@output_options
@click.pass_context
def queue(ctx: click.Context, key: str, out: Output) -> None:
    """Inbound items waiting (or running) for a routing KEY (a key string or a route id), oldest first."""
    rows = [item.to_dict() for item in engine(ctx).queue(key)]
    if not out.is_table:
        out.rows(rows, [])
        return
    echo_table(rows, ["item_id", "kind", "state", "accepted_at", "text"])
    out.line(f"depth: {sum(1 for r in rows if r['state'] == 'pending')}")


@command("ingest", writes=True)
@click.argument("file", type=click.File("rb"))
@click.option("--gateway", default="ingest", show_default=True,
              help="The gateway name this replay boots as (concurrent ingests need one each).")
@click.option("--progress-every", type=click.IntRange(min=0), default=1000, show_default=True,
              help="A progress line on stderr every N lines (0: none).")
@output_options
@click.pass_context
def ingest_command(ctx: click.Context, file: Any, gateway: str, progress_every: int, out: Output) -> None:
    """Replay JSONL gateway traffic (FILE, or - for stdin) through the engine.

    \b
    One JSON object a line:
      {"op": "message", "source": {...}, "text": "hi", "message_id": "m1",
       "at": "2026-11-01T10:00:00Z", "reply": "hello!"}
      {"op": "command", "source": {...}, "text": "/new", "message_id": "c1"}
    \b
    source    a SessionSource: platform, chat_type, chat_id, user_id, thread_id, ...
    text      the message, or the slash command (/new /reset /stop /queue TEXT /resume ID)
    message_id  optional: the platform's id; a record without one is identified by its file
              (resolved path, or stdin), its line number and its content
    at        optional ISO time with a zone: the record's clock (default: now)
    reply     optional: the reply given; a message with one runs a whole turn, without one it
              stays queued (and is answered by the next turn on its key)

    Lines are applied as they arrive (a pipe or FIFO streams). A bad line is reported with its
    number and skipped; the rest is applied. A field outside these (a misspelt "rpely"), or
    given twice, makes its line bad. Re-running a file (or an overlapping one after a
    kill) duplicates nothing: each message is accepted once per routing key by its message_id.
    A refused repeat is counted as a duplicate, not as applied.
    The replay boots as a gateway, so a killed one is recovered by the next ingest or by
    `turnlog recover --gateway ingest`. Exit code 1 if any line failed or a reply was not recorded.
    """
    from ..ingest import ReplayClock, ingest, read_lines

    clock = ReplayClock()
    t = engine(ctx, clock=clock)

    def progress(report: Any) -> None:
        if progress_every and report.lines % progress_every == 0:
            click.echo(f"ingest: {report.lines} lines, {report.applied} applied, {len(report.errors)} failed",
                       err=True)

    report = ingest(t, clock, read_lines(file), gateway=gateway, origin=_origin_of(file), on_line=progress)
    for line_no, error in report.errors:
        click.echo(f"line {line_no}: {visible(str(error))}", err=True)
    for line_no, reason in report.unrecorded:
        click.echo(f"line {line_no}: reply not recorded: {visible(str(reason))}", err=True)
    out.record(report.to_dict(), lambda: out.line(
        f"{report.applied} records applied ({report.turns} turns, {report.commands} commands,"
        f" {report.queued} queued), {report.duplicates} duplicates, {len(report.errors)} failed"
        + (f", {len(report.unrecorded)} replies not recorded" if report.unrecorded else "")))
    if report.errors or report.unrecorded:
        ctx.exit(1)


def _origin_of(file: Any) -> str:
    """What identifies the file an ingest reads (see turnlog.ingest): its resolved path, so the same
    file named another way is the same file; stdin (click names it "<stdin>" or "-") has none."""
    from ..ingest import STDIN

    name = getattr(file, "name", None)
    if not isinstance(name, str) or name in ("-", STDIN) or not os.path.exists(name):
        return STDIN
    return os.path.realpath(name)


@command()
@click.option("--sessions", "-S", type=click.IntRange(min=1), default=200, show_default=True,
              help="Sessions (conversations) in the workload.")
@click.option("--turns", "-T", type=click.IntRange(min=1), default=25, show_default=True,
              help="Turns per session.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the workload's randomness.")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Keep the benchmark database here (default: a temporary folder, deleted).")
@click.option("--concurrency", "-C", type=click.IntRange(min=0), default=0, show_default=True,
              help="Keys in flight at once through the asyncio API (0: one turn after another, the standard run).")
@click.option("--store-threads", type=click.IntRange(min=1), default=None,
              help="With --concurrency: how many store threads do store work at once (default 4).")
@click.option("--metrics/--no-metrics", default=False, show_default=True,
              help="Measure the turns for a metrics scrape (needs prometheus-client), and time one scrape.")
@click.option("--traces/--no-traces", default=False, show_default=True,
              help="Record every turn's spans with the OpenTelemetry SDK (exported to nowhere).")
@click.option("--gc-mode", type=click.Choice(GC_MODES), default=GC_BETWEEN_TURNS, show_default=True,
              help="The engine's gc_mode: full garbage collections between turns, or the interpreter's own.")
@output_options
def bench(sessions: int, turns: int, seed: int, workdir: str | None, concurrency: int, store_threads: int | None,
          metrics: bool, traces: bool, gc_mode: str, out: Output) -> None:
    """Run the standard gateway workload (shared/bench/WORKLOAD.md) and print its figures."""
    from ..bench import run_bench
    from ..bench_concurrent import STORE_THREADS, run_concurrent_bench

    if store_threads is not None and not concurrency:
        raise click.UsageError("--store-threads applies to the concurrent workload: give --concurrency too")
    if workdir is not None:
        require_folder(workdir)  # the folder itself is made, not the ones on its way

    show_bar = sys.stderr.isatty() and out.is_table
    with click.progressbar(length=sessions * turns, label="turns", file=sys.stderr, hidden=not show_bar) as bar:
        done = [0]

        def progress(n: int, total: int) -> None:
            bar.update(n - done[0])
            done[0] = n

        try:
            result = (run_concurrent_bench(sessions, turns, seed, concurrency, workdir=workdir, progress=progress,
                                           store_threads=store_threads or STORE_THREADS)
                      if concurrency else run_bench(sessions, turns, seed, workdir=workdir, progress=progress,
                                                    metrics=metrics, traces=traces, gc_mode=gc_mode))
        except ValueError as e:
            raise click.UsageError(str(e)) from None
    if concurrency:
        lat, engine = result["turn_latency_ms"], result["engine_ms"]
        out.record(result, lambda: out.line(
            f"{result['turns_done']} turns on {sessions} sessions, {result['params']['concurrency']} keys in flight"
            f" ({result['params']['store_threads']} store threads):"
            f" {result['turns_per_s']} turns/s, turn p50 {lat['p50']} ms, p99 {lat['p99']} ms;"
            f" engine time a turn p50 {engine['p50']} ms, p99 {engine['p99']} ms"))
        return

    def text() -> None:
        lat = result["turn_latency_ms"]
        out.line(f"{result['turns_done']} turns on {sessions} sessions: {result['turns_per_s']} turns/s,"
                 f" p50 {lat['p50']} ms, p99 {lat['p99']} ms")
        out.line(f"restart (load every session and transcript): {result['restart']['load_s']} s")
        acc = result["accept_latency_ms"]
        out.line(f"accept alone (what a webhook acks after): p50 {acc['p50']} ms, p99 {acc['p99']} ms")
        out.line(f"projections rebuild: {result['projections_rebuild']['seconds']} s"
                 f" ({result['projections_rebuild']['events_per_s']} events/s)")
        out.line(f"bytes after workload: {result['bytes_after_workload']}")
    out.record(result, text)


@command(writes=True, dry_run_reads=True)
@click.option("--gateway", "name", default="main", show_default=True, help="Gateway name.")
@click.option("--dry-run", is_flag=True, help="Report what recovery would do; change nothing.")
@output_options
@click.pass_context
def recover(ctx: click.Context, name: str, dry_run: bool, out: Output) -> None:
    """Recover the unclean boots of a gateway: interrupted turns, owed replies, stuck loops.

    Replies are delivered by the gateway's own ledger sweep when it starts; this command records
    what recovery decides (or, with --dry-run, only prints it). --nl/--csv: the interrupted turns.
    """
    report = engine(ctx).recover(name, dry_run=dry_run)
    interrupted = [t.to_dict() for t in report.interrupted]

    def text() -> None:
        verb = "would recover" if dry_run else "recovered"
        out.line(f"{verb} {len(report.recovered_boots)} unclean boot(s) of gateway {name}")
        echo_table(interrupted, ["session_id", "session_key", "epoch", "boot_id", "action"])
    out.record(report.to_dict(), text, rows=interrupted)


@command()
@click.option("--gateway", "name", default="main", show_default=True, help="Gateway name.")
@output_options
@click.pass_context
def status(ctx: click.Context, name: str, out: Output) -> None:
    """Last boot and whether it ended clean, active turns, leases their holders left to expire, owed
    replies, interrupted and suspended sessions."""
    data = engine(ctx).status(name).to_dict()

    def text() -> None:
        boot = data["last_boot"]
        if boot is None:
            out.line(f"gateway {name}: never started")
        else:
            ended = {True: "ended clean", False: "ended UNCLEAN", None: boot["state"]}[boot["ended_clean"]]
            if boot["state"] in ("running", "draining") and not boot["recovered"]:
                ended = f"{boot['state']} (or died without a stop: `turnlog recover` tells)"
            out.line(f"gateway {name}: last boot {boot['boot_id']} (pid {boot['pid']} on {boot['host']}),"
                     f" started {boot['started_at']}, {ended}")
        for title, rows, columns in (
                ("active turns", data["active_turns"], ["session_id", "owner", "epoch", "expires_at"]),
                ("expired leases", data["expired_leases"], ["session_id", "owner", "epoch", "expires_at"]),
                ("pending deliveries", data["pending_deliveries"],
                 ["session_id", "seq", "platform", "state", "attempts"]),
                ("dead deliveries", data["dead_deliveries"],
                 ["delivery_id", "session_id", "seq", "platform", "attempts"]),
                ("resume_pending", data["resume_pending"], ["session_id", "session_key", "resume_reason"]),
                ("suspended", data["suspended"], ["session_id", "session_key", "suspend_reason"])):
            out.line("")
            out.line(f"{title}: {len(rows)}")
            if rows:
                echo_table(rows, columns)
    out.record(data, text)


@command()
@output_options
@click.pass_context
def demo(ctx: click.Context, out: Output) -> None:
    """Run a scripted multi-platform scenario on a fresh database and show what the log holds.

    With --json, --nl or --csv the tables are printed in that format and the narration goes to stderr."""
    from ..demo import run_demo

    root = ctx.find_root().obj
    db = root["db"]
    if not root.get("db_given"):
        db = os.path.join(tempfile.mkdtemp(prefix="turnlog-demo-"), "demo.db")
    elif os.path.exists(db):
        raise click.UsageError(f"the demo needs a fresh database; {db} exists")
    run_demo(db, out.line, lambda rows, columns: out.rows(rows, columns))


COMMANDS = (key, route, sessions, suspend, resume_pending, switch, export_routing, show, queue, ingest_command,
            bench, recover, status, demo)
