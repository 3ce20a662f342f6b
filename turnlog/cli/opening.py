"""How the `turnlog` command opens its database: per command, whether it writes.

Commands that write (record events, rebuild or repair read models) open the database for
writing and may create it. Every other command only reads: it never creates a database (a
mistyped --db is an error naming the path), and on a database that cannot be written (a
read-only file or folder) it opens it read-only and reads the read models as of their
positions, with a one-line note on stderr when they are behind the log. A read writes only to
catch the read models up, and gives way to another process holding the write lock (a gateway
mid-turn, a rebuild) after READ_LOCK_WAIT_S: it then reads them as of their positions too.

A write that fails on an SQLite database it created, having recorded no event, removes what the
open created (discard_if_empty): a mistyped command leaves no empty database behind.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import click

from .. import StoreError, Turnlog, TurnlogClosed, TurnlogError, local_file
from .files import require_folder

READ_LOCK_WAIT_S = 2.0


def writes(ctx: click.Context) -> bool:
    """What the command declares (cli/base.py TurnlogCommand); a dry run of a command that
    declares `dry_run_reads` only reads, as does one that declares `writes_with` given none of
    those parameters."""
    command = ctx.command
    if getattr(command, "dry_run_reads", False) and ctx.params.get("dry_run"):
        return False
    writes_with = getattr(command, "writes_with", ())
    if writes_with and not any(ctx.params.get(name) for name in writes_with):
        return False
    return bool(getattr(command, "writes", False))


def refuse_callers_own(db: str, views: str | None) -> None:
    """A `file:` URI or an in-memory name is opened by the library as given, unchecked (the Python
    API's own): at the command line a read would create the file, and a write would be lost."""
    for option, value in (("--db", db), ("--views", views)):
        if value and (value.startswith("file:") or ":memory:" in value):
            raise click.UsageError(f"{option} {value!r}: give a file path or a postgresql:// URL"
                                   " (file: URIs and :memory: are for the Python API)")


def open_engine(ctx: click.Context, db: str, views: str | None, **options: Any) -> Turnlog:
    refuse_callers_own(db, views)
    if writes(ctx):
        for path in (local_file(db, views).path, views):
            if path:
                require_folder(path)  # each, before either is made
        created = _files_a_new_database_makes(db, views)
        t = Turnlog(db, views=views, **options)
        ctx.find_root().obj["created"] = created
        return t
    file = local_file(db, views)
    path = file.path
    if getattr(ctx.command, "empty_when_missing", False) and not file.has_log():
        scratch = tempfile.TemporaryDirectory(prefix="turnlog-dry-run-")
        ctx.call_on_close(scratch.cleanup)
        return Turnlog(os.path.join(scratch.name, "empty.db"), **options)
    read_only = os.path.exists(path) and not file.writable()
    t = Turnlog(db, views=views, read_only=read_only, create=False, lock_wait=READ_LOCK_WAIT_S, **options)
    # Caught up now, to know whether to say they are stale. A failure here is met again, and
    # said, by the command's own reads; one that reads no read model (verify --chain) goes on.
    try:
        t.maintenance.catch_up()
    except StoreError:
        pass
    if t.stale:
        behind = t.maintenance.projections_behind()
        if behind:
            why = "is read-only" if read_only else "is being written by another process"
            click.echo(f"note: {path} {why}: read models are {behind} events behind the log"
                       " (may be stale)", err=True)
    return t


def _files_a_new_database_makes(db: str, views: str | None) -> tuple[str, ...]:
    """The files of an SQLite log not made yet (and of its --views file) that do not exist yet;
    none for a log that exists, or that lives on a server."""
    file = local_file(db, views)
    if not file.holds_log or os.path.lexists(file.path):
        return ()
    candidates = file.files() + (local_file(views).files() if views else ())
    return tuple(name for name in candidates if not os.path.lexists(name))


def discard_if_empty(ctx: click.Context) -> None:
    """After a failed write: when its open created the database and the log holds no event,
    close it and remove the files the open created. Anything accepted stays."""
    obj = ctx.find_root().obj or {}
    created = obj.pop("created", ())
    t = obj.get("engine")
    if not created or t is None:
        return
    try:
        if not _log_is_empty(t, obj["db"], obj["views"]):
            return
    except TurnlogError:
        return  # not knowing what the log holds, keep it
    t.close()
    for name in created:
        try:
            os.remove(name)
        except FileNotFoundError:
            pass


def _log_is_empty(t: Turnlog, db: str, views: str | None) -> bool:
    try:
        return t.maintenance.log_head() == 0
    except TurnlogClosed:
        pass  # ctx.exit closes the command's context, and so the engine, before it raises
    with Turnlog(db, views=views, read_only=True, create=False) as again:
        return again.maintenance.log_head() == 0
