"""Migration commands: import-hermes and export-hermes (registered on `turnlog`)."""

from __future__ import annotations

import sys
from typing import Any

import click

from .base import command, engine
from .files import require_folder
from .. import check_hermes_home
from .output import Output, output_options


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


@command("import-hermes", writes=True, dry_run_reads=True, empty_when_missing=True)
@click.argument("hermes_home", type=click.Path(file_okay=False, path_type=str))
@click.option("--profile", default=None, help="Import the named profile (HERMES_HOME/profiles/NAME).")
@click.option("--dry-run", is_flag=True, help="Read the home and report what would be imported; write nothing.")
@click.option("--force", is_flag=True, help="Import a home whose schema version this importer does not know.")
@output_options
@click.pass_context
def import_hermes(ctx: click.Context, hermes_home: str, profile: str | None, dry_run: bool, force: bool,
                  out: Output) -> None:
    """Import a Hermes home: its sessions, transcripts, routing keys and flags, as events.

    Safe to run again: sessions already in the log are skipped, so a second run imports
    nothing, and an interrupted run resumes where it stopped. A row that cannot be imported
    is skipped and named with its reason; a damaged cell is repaired and named.
    """
    check_hermes_home(hermes_home, profile=profile, force=force)  # said before a database is opened, or made
    progress = _Progress(enabled=out.is_table and sys.stderr.isatty())
    try:
        report = engine(ctx).import_hermes(hermes_home, profile=profile, dry_run=dry_run, progress=progress,
                                              force=force)
    finally:
        progress.close()
    out.record(report.to_dict(), lambda: _import_text(report, dry_run, out), rows=report.skipped)


def _import_text(report: Any, dry_run: bool, out: Output) -> None:
    verb = "would import" if dry_run else "imported"
    if report.nothing_to_do:
        out.line(f"nothing to import: the {report.sessions_already_imported} sessions of {report.home}"
                 " are already in the log")
    else:
        out.line(f"{verb} {report.sessions_imported} sessions, {report.messages_imported} messages,"
                 f" {report.routes_imported} routing keys from {report.home}")
    out.line(f"already imported: {report.sessions_already_imported} sessions;"
             f" flags: {report.suspended} suspended, {report.resume_pending} resume_pending;"
             f" ledger rows: {report.ledger_rows} ({report.owed_replies} owed, in the ledger now);"
             f" restart counters: {report.restart_counts}")
    if report.routes_rekeyed:
        out.line(f"\nKeys moved to their Slack workspace or bot account: {len(report.routes_rekeyed)}")
        out.rows(report.routes_rekeyed, ["hermes_key", "session_key"])
    if report.key_options.get("whatsapp_aliases"):
        out.line(f"\nWhatsApp keys use the bridge's aliases: route with"
                 f" EngineConfig(whatsapp_aliases={report.key_options['whatsapp_aliases']!r})")
    if report.repaired:
        out.line(f"\nrepaired: {len(report.repaired)}")
        out.rows(report.repaired, ["what", "reason"])
    out.line(f"\nskipped: {len(report.skipped)}")
    if report.skipped:
        out.rows(report.skipped, ["what", "reason"])


@command("export-hermes")
@click.argument("out_home", type=click.Path(path_type=str))
@click.option("--force", is_flag=True, help="Replace the files of an existing Hermes home.")
@output_options
@click.pass_context
def export_hermes(ctx: click.Context, out_home: str, force: bool, out: Output) -> None:
    """Write the log's sessions, transcripts and routing as a Hermes 0.19.0 home (a new directory).

    No file is written through a symbolic link; an existing home is replaced only with --force."""
    require_folder(out_home)
    report = engine(ctx).export_hermes(out_home, force=force)
    out.record(report.to_dict(), lambda: _export_text(report, out), rows=report.skipped)


def _export_text(report: Any, out: Output) -> None:
    out.line(f"wrote {report.sessions} sessions, {report.messages} messages, {report.routes} routing keys,"
             f" {report.ledger_rows} ledger rows to {report.home}")
    if report.skipped:
        out.line(f"\nskipped: {len(report.skipped)}")
        out.rows(report.skipped, ["what", "reason"])


COMMANDS = (import_hermes, export_hermes)
