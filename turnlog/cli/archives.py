"""Commands of retention: archive, restore-archive, compact-file (registered on `turnlog`)."""

from __future__ import annotations

import click

from .. import compact_file as compact_database_file
from .backups import progress_bar
from .base import command, engine
from .files import require_folder
from .output import Output, output_options


@command(writes=True, dry_run_reads=True)
@click.argument("out_path", metavar="OUT.tlar", type=click.Path(dir_okay=False, path_type=str))
@click.option("--older-than", default=None, metavar="DURATION",
              help="Archive sessions ended, suspended or superseded more than this long ago (e.g. 90d, 12h, 2w, 1y).")
@click.option("--idle-for", default=None, metavar="DURATION",
              help="Archive sessions with no activity for more than this long (e.g. 365d). Neither option:"
                   " the configured retention (EngineConfig.retention: 90d and 365d by default).")
@click.option("--dry-run", is_flag=True, help="List the sessions that would be archived; change nothing.")
@output_options
@click.pass_context
def archive(ctx: click.Context, out_path: str, older_than: str | None, idle_for: str | None, dry_run: bool,
            out: Output) -> None:
    """Move old sessions out of the log into the new archive file OUT.tlar.

    The archive (a zip of a JSON manifest and the events as stored, docs/archive.md) is written,
    fsynced and read back; then one transaction records SessionsArchived and removes the
    sessions' events from the log. The sessions stay listed as archived; `verify --chain`
    still passes; the database file gives the space back (incremental vacuum). Never a session
    that owns a key, holds a lease or owes a delivery. SQLite logs only.
    """
    require_folder(out_path)
    t = engine(ctx)
    with progress_bar("archiving", out) as progress:
        report = t.archive(out_path, older_than=older_than, idle_for=idle_for, dry_run=dry_run, progress=progress)

    def text() -> None:
        for c in report.sessions:
            out.line(f"{'would archive' if report.dry_run else 'archived'} {c.session_id} ({c.session_key}):"
                     f" {c.rule}, last change {c.last_change}")
        if not report.sessions:
            out.line("no session to archive")
        elif not report.dry_run:
            out.line(f"archive: {report.path} ({report.bytes} bytes), {len(report.sessions)} sessions,"
                     f" {report.events} events")
            out.line(f"sha256: {report.sha256}")
            out.line(f"database: {report.db_bytes_before} -> {report.db_bytes_after} bytes")
    out.record(report.to_dict(), text)


@command("restore-archive", writes=True)
@click.argument("archive_path", metavar="FILE", type=click.Path(dir_okay=False, path_type=str))
@output_options
@click.pass_context
def restore_archive(ctx: click.Context, archive_path: str, out: Output) -> None:
    """Bring the sessions of the archive FILE back into the log.

    Its checksum is verified and each event goes back to its old position, checked against the
    seal the hash chain kept; transcripts, history and search are as before the archive. A file
    restored already is left alone.
    """
    t = engine(ctx)
    with progress_bar("restoring", out) as progress:
        report = t.restore_archive(archive_path, progress=progress)

    def text() -> None:
        if report.already_restored:
            out.line(f"{report.path} was restored already: nothing done")
        else:
            out.line(f"restored {len(report.sessions)} sessions ({report.events} events) from {report.path}")
        out.line(f"sha256: {report.sha256}")
    out.record(report.to_dict(), text)


@command("compact-file")
@output_options
@click.pass_context
def compact_file(ctx: click.Context, out: Output) -> None:
    """Rewrite the SQLite database named by --db without its free pages, offline.

    For a database made before incremental vacuum: VACUUM INTO a new file (incremental vacuum on
    from then on), verified, then one rename. Refused while a gateway or tool has it open.
    """
    obj = ctx.find_root().obj
    report = compact_database_file(obj["db"])

    def text() -> None:
        out.line(f"compacted {report.path}: {report.bytes_before} -> {report.bytes_after} bytes")
    out.record(report.to_dict(), text)


COMMANDS = (archive, restore_archive, compact_file)
