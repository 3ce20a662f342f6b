"""Every output the command line names (a file, a folder, a database to make) given in a folder
that does not exist: one line, `Error: cannot write PATH: no such folder: FOLDER`, exit 1 (the
command line is well formed; the file system says no, as for a missing --db), nothing made."""

from __future__ import annotations

import os

import click
import pytest

from turnlog import Turnlog
from turnlog.cli import main
from chat import ALICE, collect, echo
from harness.cli import run

ROUTE = ["route", "--platform", "telegram", "--chat-id", "1", "--user-id", "1"]

# Each case: the arguments ({m}: a folder that does not exist), and the output it names.
CASES = {
    "backup": (["backup", "{m}/b.db"], "{m}/b.db"),
    "archive": (["archive", "{m}/a.tlar"], "{m}/a.tlar"),
    "export": (["export", "{key}", "-o", "{m}/e.json"], "{m}/e.json"),
    "export-routing": (["export-routing", "-o", "{m}/r.json"], "{m}/r.json"),
    "export-hermes": (["export-hermes", "{m}/home"], "{m}/home"),
    "copy --to": (["copy", "--to", "{m}/c.db"], "{m}/c.db"),
    "copy --to-views": (["copy", "--to", "postgresql://127.0.0.1:1/none", "--to-views", "{m}/v.db"], "{m}/v.db"),
    "restore --db": (["restore", "{backup}", "--db", "{m}/r.db"], "{m}/r.db"),
    "bench --workdir": (["bench", "--workdir", "{m}/wd", "-S", "1", "-T", "1"], "{m}/wd"),
    "--db of a write": (["--db", "{m}/new.db", *ROUTE], "{m}/new.db"),
    "--views of a write": (["--db", "{tmp}/new.db", "--views", "{m}/v.db", *ROUTE], "{m}/v.db"),
}
# The parameters that name what a command reads, not what it writes.
INPUTS = {("compact", "summary_file"), ("import-hermes", "hermes_home"), ("ingest", "file"),
          ("restore", "backup_path"), ("restore", "key_file"), ("restore-archive", "archive_path")}
OUTPUTS = {("archive", "out_path"), ("backup", "out_path"), ("bench", "workdir"), ("copy", "to"),
           ("copy", "to_views"), ("export", "output"), ("export-hermes", "out_home"), ("export-routing", "output")}


@pytest.fixture
def log(tmp_path):
    db = tmp_path / "log.db"
    with Turnlog(str(db)) as t:
        t.handle_message(ALICE, "hello", echo, collect([]))
        key = t.routing_key(ALICE)
        t.backup(str(tmp_path / "backup.db"))
    return str(db), key, str(tmp_path / "backup.db")


def listing(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_output_in_a_missing_folder_is_one_line_exit_1_and_nothing_is_made(tmp_path, log, case):
    db, key, backup = log
    missing = tmp_path / "no" / "such"
    values = {"m": str(missing), "key": key, "backup": backup, "tmp": str(tmp_path)}
    args, output = CASES[case]
    before = listing(tmp_path)

    result = run("--db", db, *[a.format(**values) for a in args])

    assert result.exit_code == 1, result.output
    assert result.stderr == f"Error: cannot write {output.format(**values)}: no such folder: {missing}\n"
    assert listing(tmp_path) == before


def test_every_path_parameter_is_an_input_or_an_output_walked_above():
    def leaves(group, prefix=()):
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if isinstance(command, click.Group):
                yield from leaves(command, (*prefix, name))
            else:
                yield " ".join((*prefix, name)), command

    named = {(name, p.name) for name, command in leaves(main) for p in command.params
             if isinstance(p.type, (click.Path, click.File)) or p.name in ("to", "to_views")}
    assert named == INPUTS | OUTPUTS
    walked = {args[0] for args, _ in CASES.values()}
    assert {name for name, _ in OUTPUTS} <= walked


def test_a_missing_folder_with_control_characters_in_its_name_is_shown_escaped(tmp_path, log):
    db, _, _ = log
    missing = tmp_path / "no\x01such" / "b.db"

    result = run("--db", db, "backup", str(missing))

    assert result.exit_code == 1
    assert "\x01" not in result.stderr

    def shown(path):
        return str(path).replace("\x01", "\\x01")
    assert result.stderr == f"Error: cannot write {shown(missing)}: no such folder: {shown(missing.parent)}\n"
