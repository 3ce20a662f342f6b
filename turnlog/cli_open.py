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

from .api import Turnlog
from .commands import dbfile
from .commands.store import parse_location

# Commands that write to the database; those in DRY_RUN_READS only read with --dry-run.
WRITING_COMMANDS = frozenset({"route", "suspend", "resume-pending", "switch", "ingest", "recover", "rebuild",
                              "doctor", "fork", "import-hermes"})
DRY_RUN_READS = frozenset({"recover", "doctor", "import-hermes"})
# Dry runs that compare with the log: against a database not made yet, that is an empty log.
EMPTY_WHEN_MISSING = frozenset({"import-hermes"})


def writes(ctx: click.Context) -> bool:
    name = ctx.info_name or ""
    if name in DRY_RUN_READS and ctx.params.get("dry_run"):
        return False
    return name in WRITING_COMMANDS


def open_engine(ctx: click.Context, db: str, views: str | None, **options: Any) -> Turnlog:
    if writes(ctx):
        return Turnlog(db, views=views, **options)
    location = parse_location(db, views)
    path = location.env["SQLITE_DBNAME"] if location.kind == "sqlite" else location.views_path
    if location.kind == "sqlite" and ctx.info_name in EMPTY_WHEN_MISSING and not os.path.lexists(path):
        scratch = tempfile.TemporaryDirectory(prefix="turnlog-dry-run-")
        ctx.call_on_close(scratch.cleanup)
        return Turnlog(os.path.join(scratch.name, "empty.db"), **options)
    read_only = os.path.exists(path) and not dbfile.writable(path)
    t = Turnlog(db, views=views, read_only=read_only, create=False, **options)
    if read_only:
        behind = t.projections_behind()
        if behind:
            click.echo(f"note: {path} is read-only: read models are {behind} events behind the log"
                       " (may be stale)", err=True)
    return t
