"""Running the `turnlog` command in-process (click's CliRunner), with no TURNLOG_* variables leaking in."""

from __future__ import annotations

from click.testing import CliRunner, Result

from turnlog.cli import main


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"TURNLOG_DB": None, "TURNLOG_DEBUG": None})


def ok(*args: str) -> Result:
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result
