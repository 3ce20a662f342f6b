"""Commands that copy a whole database: backup, restore, copy (registered on `turnlog`)."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import click

from .. import StoreError, local_file, restore as restore_backup
from .base import command, engine
from .files import require_folder
from .output import Output, output_options

@contextmanager
def progress_bar(label: str, out: Output) -> Iterator[Callable[[int, int], None]]:
    """A `progress(done, total)` drawing a bar on stderr when it is a terminal (silent for pipes,
    CI and the machine formats)."""
    with click.progressbar(length=1, label=label, file=sys.stderr, hidden=not (sys.stderr.isatty() and out.is_table),
                           show_eta=True) as bar:
        def progress(done: int, total: int) -> None:
            bar.length = max(total, 1)
            bar.update(max(0, done - bar.pos))
        yield progress


@command()
@click.argument("out_path", metavar="OUT", type=click.Path(dir_okay=False, path_type=str))
@output_options
@click.pass_context
def backup(ctx: click.Context, out_path: str, out: Output) -> None:
    """Back the SQLite database up to the new file OUT while gateways go on writing.

    The copy is the database as of one commit, checked (SQLite's quick_check and the hash chain
    recomputed) before it is named OUT; printed with its sha256, event count and head position.
    An encrypted database's backup leaves its read models out: they hold the words in clear.
    A PostgreSQL log is backed up with pg_dump (see docs/operations.md).
    """
    require_folder(out_path)
    t = engine(ctx)
    with progress_bar("backing up", out) as progress:
        report = t.backup(out_path, progress=progress)
    data = report.to_dict()

    def text() -> None:
        out.line(f"backup: {report.path} ({report.bytes} bytes)")
        out.line(f"sha256: {report.sha256}")
        out.line(f"events: {report.events} (head position {report.head}); chain: ok")
        if report.key_fingerprint:
            out.line(f"needs master key: {report.key_fingerprint}")
        if not report.read_models:
            out.line("read models: left out (they hold the words in clear); the first open of a restore rebuilds them")
    out.record(data, text)


@command()
@click.argument("backup_path", metavar="BACKUP", type=click.Path(dir_okay=False, path_type=str))
@click.option("--force", is_flag=True, help="Replace the database at --db (never one another process has open).")
@click.option("--key-file", default=None, metavar="PATH", type=click.Path(dir_okay=False, path_type=str),
              help="The master key file of an encrypted backup's database, copied beside the restored one as"
                   " <db>.key (else TURNLOG_MASTER_KEY or <db>.key must hold it).")
@output_options
@click.pass_context
def restore(ctx: click.Context, backup_path: str, force: bool, key_file: str | None, out: Output) -> None:
    """Put the backup file BACKUP in place of the database named by --db (required).

    The backup is verified first, then renamed into place in one step. An existing database is
    replaced only with --force, and never while a gateway or tool has it open.
    """
    obj = ctx.find_root().obj
    if not obj["db_given"]:
        raise click.UsageError("name the database to restore to with --db PATH")
    require_folder(local_file(obj["db"]).path)
    with progress_bar("restoring", out) as progress:
        report = restore_backup(backup_path, obj["db"], force=force, progress=progress, key_file=key_file)

    def text() -> None:
        what = "replaced" if report.replaced else "created"
        out.line(f"restored {report.backup} to {report.path} ({what}): {report.events} events"
                 f" (head position {report.head}); chain: ok")
        out.line(f"sha256: {report.sha256}")
        if report.key_fingerprint:
            out.line(f"master key {report.key_fingerprint}: at hand")
    out.record(report.to_dict(), text)


@command("copy")
@click.option("--to", "to", required=True, metavar="URL",
              help="Where to copy the log: a postgresql:// URL or an SQLite path (an empty database, or the"
                   " target of an interrupted copy).")
@click.option("--to-views", default=None, metavar="PATH",
              help="The read-model SQLite file for a PostgreSQL target (required with --to postgresql://...).")
@click.option("--batch", type=click.IntRange(min=1), default=None,
              help="Events per write transaction on the target (default 2000).")
@click.option("--progress-every", type=click.IntRange(min=0), default=0, show_default=True,
              help="A progress line on stderr every N events copied (0: none; a terminal shows a bar).")
@output_options
@click.pass_context
def copy(ctx: click.Context, to: str, to_views: str | None, batch: int | None, progress_every: int,
         out: Output) -> None:
    """Copy the whole log of --db, in order, with its positions and hash chain, to another store.

    Then compare the two logs event by event, verify the target's chain and rebuild its read
    models. Run it again after an interruption: it goes on from the target's head. Stop the
    gateways first; events written meanwhile are left for the next run.
    """
    try:
        target = local_file(to, to_views).path
    except StoreError:
        target = None  # a PostgreSQL target without --to-views: copy_to says so, as a usage mistake
    for path in (target, to_views):
        if path:
            require_folder(path)
    t = engine(ctx)
    copied = 0
    with progress_bar("copying events", out) as bar:
        def progress(done: int, total: int) -> None:
            nonlocal copied
            before, copied = copied, done  # each batch is committed before it is counted
            bar(done, total)
            if progress_every and (done // progress_every > before // progress_every or done == total):
                click.echo(f"copy: {done} of {total} events copied", err=True)
        try:
            report = t.copy_to(to, views=to_views, batch=batch, progress=progress)
        except KeyboardInterrupt:
            # What is copied stays: the next run goes on from the target's head.
            raise KeyboardInterrupt(f"{copied} events copied; run the same command again to resume") from None
    data: dict[str, Any] = report.to_dict()

    def text() -> None:
        resumed = f", resumed after position {report.resumed_from}" if report.resumed_from else ""
        out.line(f"copied {report.copied} events to {report.target}{resumed}")
        out.line(f"verified: {report.events} events through position {report.head} match the source; chain: ok")
        out.line(f"read models rebuilt: {', '.join(report.read_models)} ({report.seconds} s)")
    out.record(data, text)


COMMANDS = (backup, restore, copy)
