"""Migration commands: import-hermes and export-hermes (registered on `turnlog`)."""

from __future__ import annotations

import sys
from typing import Any

import click

from .cli import echo_json, echo_table, engine, main


class _Progress:
    """A progress bar on stderr when it is a terminal; silent otherwise (pipes, CI, --json)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None
        self.shown = 0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        if self.bar is None:
            self.bar = click.progressbar(length=total, label="importing messages", file=sys.stderr)
            self.bar.__enter__()
        self.bar.update(done - self.shown)
        self.shown = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


@main.command("import-hermes")
@click.argument("hermes_home", type=click.Path(file_okay=False, path_type=str))
@click.option("--profile", default=None, help="Import the named profile (HERMES_HOME/profiles/NAME).")
@click.option("--dry-run", is_flag=True, help="Read the home and report what would be imported; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def import_hermes(ctx: click.Context, hermes_home: str, profile: str | None, dry_run: bool, as_json: bool) -> None:
    """Import a Hermes home: its sessions, transcripts, routing keys and flags, as events.

    Safe to run again: sessions already in the log are skipped, so a second run imports
    nothing, and an interrupted run resumes where it stopped.
    """
    progress = _Progress(enabled=not as_json and sys.stderr.isatty())
    try:
        report = engine(ctx).import_hermes(hermes_home, profile=profile, dry_run=dry_run, progress=progress)
    finally:
        progress.close()
    data = report.to_dict()
    if as_json:
        echo_json(data)
        return
    verb = "would import" if dry_run else "imported"
    if report.nothing_to_do:
        click.echo(f"nothing to import: the {report.sessions_already_imported} sessions of {report.home}"
                   " are already in the log")
    else:
        click.echo(f"{verb} {report.sessions_imported} sessions, {report.messages_imported} messages,"
                   f" {report.routes_imported} routing keys from {report.home}")
    click.echo(f"already imported: {report.sessions_already_imported} sessions;"
               f" flags: {report.suspended} suspended, {report.resume_pending} resume_pending;"
               f" ledger rows: {report.ledger_rows}; restart counters: {report.restart_counts}")
    if report.routes_rekeyed:
        click.echo(f"\nSlack keys moved to their workspace: {len(report.routes_rekeyed)}")
        echo_table(report.routes_rekeyed, ["hermes_key", "session_key"])
    if report.key_options.get("whatsapp_aliases"):
        click.echo(f"\nWhatsApp keys use the bridge's aliases: route with"
                   f" EngineConfig(whatsapp_aliases={report.key_options['whatsapp_aliases']!r})")
    click.echo(f"\nskipped: {len(report.skipped)}")
    if report.skipped:
        echo_table(report.skipped, ["what", "reason"])


@main.command("export-hermes")
@click.argument("out_home", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def export_hermes(ctx: click.Context, out_home: str, as_json: bool) -> None:
    """Write the log's sessions, transcripts and routing as a Hermes 0.19.0 home (a new directory)."""
    report = engine(ctx).export_hermes(out_home)
    if as_json:
        echo_json(report.to_dict())
        return
    click.echo(f"wrote {report.sessions} sessions, {report.messages} messages, {report.routes} routing keys,"
               f" {report.ledger_rows} ledger rows to {report.home}")
    if report.skipped:
        click.echo(f"\nskipped: {len(report.skipped)}")
        echo_table(report.skipped, ["what", "reason"])
