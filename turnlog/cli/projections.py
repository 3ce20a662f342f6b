"""Commands over the read models: search, rebuild, verify, doctor (registered on `turnlog`)."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import click

from .base import command, echo_table, engine
from .keys import key_filter
from .output import Output, output_options

SNIPPET_WIDTH = 100


@command()
@click.argument("query")
@click.option("--session", default=None, help="Only this session id.")
@click.option("--key", default=None, help="Only messages of this routing key (a key string or a route id).")
@click.option("--platform", default=None, help="Only this platform (telegram, slack, ...).")
@click.option("--role", default=None, help="Only this role (user, assistant, tool, ...).")
@click.option("--since", default=None, help="From this ISO time (with a zone) or date, inclusive.")
@click.option("--until", default=None, help="Before this ISO time (with a zone) or date.")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True, help="Show at most this many hits.")
@click.option("--include-undone", is_flag=True,
              help="Also find messages undone or retried out of the agent's history (marked in the fate column).")
@output_options
@click.pass_context
def search(ctx: click.Context, query: str, session: str | None, key: str | None, platform: str | None,
           role: str | None, since: str | None, until: str | None, limit: int, include_undone: bool,
           out: Output) -> None:
    """Full-text search of every transcript, best match first.

    QUERY is words ("quoted phrases" kept, FTS5 operators made safe) or Chinese, Japanese or
    Korean text, found by substring. Matches are marked >>>like this<<< in the snippet.
    """
    t = engine(ctx)
    found = t.search(query, session=session, key=key_filter(t, key), platform=platform, role=role, since=since,
                     until=until, limit=limit, include_undone=include_undone)
    hits = [hit.to_dict() for hit in found]

    def prepare(hits: list[dict[str, Any]]) -> None:
        for hit in hits:
            text = " ".join(hit["snippet"].split())
            hit["snippet"] = text if len(text) <= SNIPPET_WIDTH else text[: SNIPPET_WIDTH - 1] + "…"
    fated = any(hit["fate"] for hit in hits)  # the column only when a hit has left the agent's history
    out.rows(hits, ["session_id", "seq", "role", "at", "session_key", *(["fate"] if fated else []), "snippet"],
             prepare)


@command(writes=True)
@click.argument("names", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Rebuild every projection.")
@click.option("--batch", type=click.IntRange(min=1), default=None,
              help="Events per write transaction (default 20000).")
@click.option("--pause", type=click.FloatRange(min=0, max=threading.TIMEOUT_MAX * 1000), default=0.0, show_default=True,
              help="Milliseconds to wait between batches, to let a live gateway's writes through.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Processes sharing the work (default: 2 for a large rebuild on 2 cores or more).")
@click.option("--index-only", is_flag=True,
              help="Rebuild only the search model's full-text indexes from its rows, without reading the log"
                   " (for a damaged index; the model itself must be up to date).")
@output_options
@click.pass_context
def rebuild(ctx: click.Context, names: tuple[str, ...], all_: bool, batch: int | None, pause: float,
            workers: int | None, index_only: bool, out: Output) -> None:
    """Rebuild read models from the log into fresh tables, then swap them in.

    NAMES are projections (routes, sessions, timeline, ledger, queue, leases, route_history, search,
    ...). A rebuild that was interrupted resumes where it stopped when run again. On a terminal
    a progress bar shows events/s and the time left. With --index-only (NAMES: none or search),
    only the search model's full-text indexes are rebuilt, from its own rows.
    """
    if index_only:
        _rebuild_index_only(ctx, names, all_ or batch is not None or workers is not None or pause > 0, out)
        return
    if not names and not all_:
        raise click.UsageError("name the projections to rebuild, or give --all")
    if names and all_:
        raise click.UsageError("give projection names or --all, not both")
    t = engine(ctx)
    show_bar = sys.stderr.isatty() and out.is_table
    with click.progressbar(length=1, label="rebuilding", file=sys.stderr, hidden=not show_bar, show_eta=True,
                           item_show_func=lambda rate: rate) as bar:
        started = time.perf_counter()

        def progress(done: int, total: int) -> None:
            bar.length = max(total, 1)
            rate = done / max(time.perf_counter() - started, 1e-9)
            bar.update(max(0, done - bar.pos), f"{rate:,.0f} events/s")

        report = t.maintenance.rebuild(None if all_ else list(names), progress=progress, pause=pause / 1000,
                                       batch=batch, workers=workers)

    def text() -> None:
        rate = f", {report['events_per_s']:,} events/s" if report["events_per_s"] else ""
        shared = f", {report['workers']} processes" if report["workers"] > 1 else ""
        out.line(f"rebuilt from {report['events']} events: {', '.join(report['projections'])}"
                 f" ({report['seconds']} s{rate}{shared})")
        for name, position in report["resumed"].items():
            out.line(f"{name}: resumed an interrupted rebuild at position {position}")
    out.record(report, text)


def _rebuild_index_only(ctx: click.Context, names: tuple[str, ...], other_options: bool, out: Output) -> None:
    if other_options or set(names) - {"search"}:
        raise click.UsageError("--index-only rebuilds the search indexes alone: give no other projection,"
                               " nor --all, --batch, --pause or --workers")
    report = engine(ctx).maintenance.rebuild_search_index()
    out.record(report, lambda: out.line(f"rebuilt the search indexes from {report['messages']} messages"
                                        f" ({report['cjk_messages']} with CJK text, {report['seconds']} s)"))


@command()
@click.argument("names", nargs=-1)
@click.option("--chain", is_flag=True, help="Check the log itself against its hash chain instead.")
@output_options
@click.pass_context
def verify(ctx: click.Context, names: tuple[str, ...], chain: bool, out: Output) -> None:
    """Rebuild read models from the log into a temporary file and compare them with the live ones.

    Names every projection and row that differs; exit code 1 if any does. With --chain, recompute
    the log's hash chain and name the position of every edited, deleted or moved event.
    """
    if chain:
        if names:
            raise click.UsageError("--chain checks the whole log: give no projection names")
        chain_report = engine(ctx).maintenance.verify_chain()
        breaks = [b.to_dict() for b in chain_report.breaks]
        late = chain_report.sealed_late

        def chain_text() -> None:
            if not breaks:
                out.line("chain: ok")
            for b in breaks:
                where = f"positions {b['position']}-{b['through']}" if "through" in b else f"position {b['position']}"
                out.line(f"chain: event{'s' if 'through' in b else ''} at {where} {b['problem']}")
            if late:
                out.line(f"chain: note: positions {late[0]}-{late[1]} were written before sealing on write"
                         " and sealed by a later write, as they were then")
        out.record({"ok": not breaks, "breaks": breaks,
                    "sealed_late": {"from": late[0], "through": late[1]} if late else None}, chain_text, rows=breaks)
        if breaks:
            ctx.exit(1)
        return
    report = engine(ctx).maintenance.verify(list(names) or None)

    def text() -> None:
        for p in report["projections"]:
            out.line(f"{p['name']}: {'ok' if p['ok'] else 'MISMATCH'} at position {p['position']}")
            for problem in p["problems"]:
                out.line(f"  {problem}")
            for table in p["tables"]:
                if table.get("problem"):
                    out.line(f"  {table['table']}: {table['problem']}")
                for d in table["differences"]:
                    out.line(f"  {table['table']}: {d['kind']} row {_key(d['key'])}")
                hidden = table["changed"] + table["missing"] + table["extra"] - len(table["differences"])
                if hidden > 0:
                    out.line(f"  {table['table']}: and {hidden} more")
    out.record(report, text, rows=report["projections"])
    if not report["ok"]:
        ctx.exit(1)


@command(writes=True, dry_run_reads=True)
@click.option("--dry-run", is_flag=True, help="Report only; repair nothing.")
@click.option("--deep", is_flag=True, help="Also compare every read model with a rebuild (as verify does).")
@output_options
@click.pass_context
def doctor(ctx: click.Context, dry_run: bool, deep: bool, out: Output) -> None:
    """Check the read models and rebuild damaged ones from the log (which is never changed).

    Checks SQLite's quick_check, missing tables, unfinished rebuilds, positions and the
    full-text indexes' integrity; with --deep, every row against a rebuild. Exit code 1 if a
    problem remains.
    """
    report = engine(ctx).maintenance.doctor(repair=not dry_run, deep=deep)
    rows: list[dict[str, Any]] = [
        {**f, "state": "repaired" if f["repaired"] else ("found" if dry_run else "NOT REPAIRED")}
        for f in report["findings"]]

    def text() -> None:
        if not report["findings"]:
            out.line("no problems found (" + ", ".join(report["checked"]) + ")")
        else:
            echo_table(rows, ["check", "projection", "state", "problem"])
    out.record(report, text, rows=rows)
    if not report["ok"]:
        ctx.exit(1)


def _key(key: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in key.items())


COMMANDS = (search, rebuild, verify, doctor)
