"""How the `turnlog` command opens its database: per command, whether it writes.

Commands that write (record events, rebuild or repair read models) open the database for
writing and may create it. Every other command only reads: it never creates a database (a
mistyped --db is an error naming the path), and on a database that cannot be written (a
read-only file or folder) it opens it read-only and reads the read models as of their
positions, with a one-line note on stderr when they are behind the log.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import click

from .. import Turnlog, local_file


def writes(ctx: click.Context) -> bool:
    """What the command declares (cli/base.py TurnlogCommand); a dry run of a command that
    declares `dry_run_reads` only reads."""
    command = ctx.command
    if getattr(command, "dry_run_reads", False) and ctx.params.get("dry_run"):
        return False
    return bool(getattr(command, "writes", False))


def open_engine(ctx: click.Context, db: str, views: str | None, **options: Any) -> Turnlog:
    if writes(ctx):
        return Turnlog(db, views=views, **options)
    file = local_file(db, views)
    path = file.path
    if file.holds_log and getattr(ctx.command, "empty_when_missing", False) and not os.path.lexists(path):
        scratch = tempfile.TemporaryDirectory(prefix="turnlog-dry-run-")
        ctx.call_on_close(scratch.cleanup)
        return Turnlog(os.path.join(scratch.name, "empty.db"), **options)
    read_only = os.path.exists(path) and not file.writable()
    t = Turnlog(db, views=views, read_only=read_only, create=False, **options)
    if read_only:
        behind = t.maintenance.projections_behind()
        if behind:
            click.echo(f"note: {path} is read-only: read models are {behind} events behind the log"
                       " (may be stale)", err=True)
    return t
