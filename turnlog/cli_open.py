"""How the `turnlog` command opens its database: per command, whether it writes.

Commands that write (record events, rebuild or repair read models) open the database for
writing and may create it. Every other command only reads: it never creates a database (a
mistyped --db is an error naming the path), and on a database that cannot be written (a
read-only file or folder) it opens it read-only and reads the read models as of their
positions, with a one-line note on stderr when they are behind the log.
"""

from __future__ import annotations

import os
from typing import Any

import click

from .api import Turnlog
from .commands import dbfile
from .commands.store import parse_location

# Commands that write to the database; `recover` and `doctor` only read with --dry-run.
WRITING_COMMANDS = frozenset({"route", "suspend", "resume-pending", "switch", "ingest", "recover", "rebuild",
                              "doctor", "fork"})
DRY_RUN_READS = frozenset({"recover", "doctor"})


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
    read_only = os.path.exists(path) and not dbfile.writable(path)
    t = Turnlog(db, views=views, read_only=read_only, create=False, **options)
    if read_only:
        behind = t.projections_behind()
        if behind:
            click.echo(f"note: {path} is read-only: read models are {behind} events behind the log"
                       " (may be stale)", err=True)
    return t
