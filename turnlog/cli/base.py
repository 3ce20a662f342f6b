"""What every `turnlog` command module builds on: the `main` group, its error handling, the
`command` decorator, `engine()` and the shared output helpers. This module imports no command module.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from typing import Any, NoReturn

import click

from .. import DEFAULT_DB, InvalidRequest, InvalidSetting, Turnlog, TurnlogError
from .files import write_file
from .numbers import ascii_numbers
from .opening import discard_if_empty, open_engine
from .output import cell, echo_json, echo_table, visible

__all__ = ["CommandGroup", "DB_HELP", "TurnlogCommand", "TurnlogGroup", "cell", "command", "echo_json", "echo_table", "engine",
           "main", "visible", "write_output"]

USAGE_ERROR = 2  # click's exit code for a usage mistake
INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C
DB_HELP = f"Database: an SQLite path or a postgresql:// URL (env TURNLOG_DB; default ./{DEFAULT_DB})."


def write_output(text: str, output: str, *, force: bool = False) -> None:
    """To stdout for "-", else to the file (see cli_files.write_file: atomic, never through a symlink,
    an existing file only replaced with force)."""
    if output == "-":
        click.echo(text)
    else:
        write_file(output, text + "\n", force=force)


class TurnlogCommand(click.Command):
    """A subcommand, which declares how it opens the database (see cli/opening.py): `writes` (it
    records events or repairs read models, and may create the database), `dry_run_reads` (with
    --dry-run it only reads), `writes_with` (it only reads unless one of these parameters is
    given), `empty_when_missing` (a dry run against a database not made yet compares with an
    empty log). A usage mistake found by the library (InvalidRequest) prints this
    command's usage."""

    def __init__(self, *args: Any, writes: bool = False, dry_run_reads: bool = False,
                 writes_with: tuple[str, ...] = (), empty_when_missing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        ascii_numbers(self.params)
        self.writes = writes
        self.dry_run_reads = dry_run_reads
        self.writes_with = writes_with
        self.empty_when_missing = empty_when_missing

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except InvalidSetting as e:
            discard_if_empty(ctx)
            bad_setting(ctx, e)
        except InvalidRequest as e:
            discard_if_empty(ctx)
            raise click.UsageError(visible(str(e)), ctx) from None
        except click.exceptions.Exit as e:
            if e.exit_code != 0:
                discard_if_empty(ctx)
            raise
        except BrokenPipeError:
            raise  # the reader went away: not the command's failure (TurnlogGroup)
        except BaseException:
            discard_if_empty(ctx)  # while the engine is still open: this context closes it
            raise


def bad_setting(ctx: click.Context, error: InvalidSetting) -> NoReturn:
    """A TURNLOG_* variable's bad value: a usage mistake (exit 2), but of the environment, not of
    the command line, so one line and no usage block."""
    click.echo(f"Error: {visible(str(error))}", err=True)
    ctx.exit(USAGE_ERROR)


def command(name: str | None = None, *, writes: bool = False, dry_run_reads: bool = False,
            writes_with: tuple[str, ...] = (), empty_when_missing: bool = False, **attrs: Any) -> Any:
    """`@click.command` making a TurnlogCommand; a module lists its commands in COMMANDS and
    turnlog/cli/__init__.py registers every module's list on `main`."""
    return click.command(name, cls=TurnlogCommand, writes=writes, dry_run_reads=dry_run_reads,
                         writes_with=writes_with, empty_when_missing=empty_when_missing, **attrs)


def _db_after_subcommand(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    # `turnlog sessions --db X` means the same as `turnlog --db X sessions`.
    if value is not None:
        root = ctx.find_root()
        root.obj["db"] = value
        root.obj["db_given"] = True


class TurnlogGroup(click.Group):
    """Turns turnlog's own errors into one line and exit code 1; every subcommand also takes --db.

    Commands are defined in the family modules of this package and registered on `main` by the
    explicit list in turnlog/cli/__init__.py; they depend on this module, never the other way round.
    """

    command_class = TurnlogCommand

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        if not any(p.name == "db" for p in cmd.params):
            cmd.params.append(click.Option(["--db"], expose_value=False, callback=_db_after_subcommand,
                                           help="Database (the same as turnlog --db, given after the command)."))
        super().add_command(cmd, name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except InvalidSetting as e:
            bad_setting(ctx, e)
        except InvalidRequest as e:
            raise click.UsageError(visible(str(e)), ctx) from None
        except TurnlogError as e:
            click.echo(f"Error: {visible(str(e))}", err=True)
            ctx.exit(1)
        except BrokenPipeError:
            _quiet_broken_pipe()
            ctx.exit(0)
        except KeyboardInterrupt as e:
            # A write commits whole or not at all, so what is left is what had committed. A
            # command may say what that is, and how to go on, as the interrupt's message.
            click.echo(f"turnlog: interrupted: {e}" if str(e) else "turnlog: interrupted", err=True)
            ctx.exit(INTERRUPTED)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as e:  # noqa: BLE001 - the promise is: no traceback, one line
            if isinstance(e, OSError) and _output_fails(e):
                _quiet_broken_pipe()  # the bytes still buffered would fail again at exit
                click.echo(f"turnlog: cannot write output: {e.strerror}", err=True)
                ctx.exit(1)
            if os.environ.get("TURNLOG_DEBUG"):
                raise
            click.echo(f"Error: {type(e).__name__}: {visible(str(e))} (set TURNLOG_DEBUG=1 for the traceback)",
                       err=True)
            ctx.exit(1)


def _output_fails(error: OSError) -> bool:
    """Writing the output failed (a full device, a quota, an I/O error): click.echo raises these
    with no file name; the library's own file errors name their file or are its own errors."""
    return (error.filename is None
            and error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO))


def _quiet_broken_pipe() -> None:
    """The reader went away (`turnlog sessions | head -1`): that is not an error. Point stdout at
    /dev/null so that the flush at exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # not a real file descriptor (CliRunner): nothing will be flushed to a pipe


class CommandGroup(TurnlogGroup):
    """A command with subcommands of its own (`turnlog ledger retry`): run alone, it is a read
    (a TurnlogCommand without flags); each subcommand declares how it opens the database."""

    writes = False
    dry_run_reads = False
    empty_when_missing = False


@click.group(cls=TurnlogGroup)
@click.option("--db", envvar="TURNLOG_DB", default=DEFAULT_DB, show_default=True, help=DB_HELP)
@click.option("--views", envvar="TURNLOG_VIEWS", default=None,
              help="Read-model SQLite file (only needed with a PostgreSQL log).")
@click.version_option(package_name="turnlog", help="Show the version and exit.")
@click.pass_context
def main(ctx: click.Context, db: str, views: str | None) -> None:
    """turnlog: the event-sourced session engine of a multi-platform agent gateway.

    Every session operation is an event in one log; the routing map, sessions and the audit
    timeline are projections rebuilt from it.
    """
    given = ctx.get_parameter_source("db") != click.core.ParameterSource.DEFAULT
    ctx.obj = {"db": db, "views": views, "db_given": given}


def engine(ctx: click.Context, **options: Any) -> Turnlog:
    obj = ctx.find_root().obj
    if "engine" not in obj:
        obj["engine"] = open_engine(ctx, obj["db"], obj["views"], **options)  # per command: writes or reads
        ctx.call_on_close(obj["engine"].close)
    return obj["engine"]
