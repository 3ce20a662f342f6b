"""Issue 11 item 5: `export -o` and `export-routing -o` never overwrite unasked, never follow a symbolic
link, and a missing directory is one line (exit 1, no traceback)."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import Result

from turnlog import ManualClock, SequentialIds, Turnlog
from harness.cli import run

from chat import alice, reply_with

KEY = "agent:main:telegram:dm:42"
COMMANDS = {"export": ["export", KEY], "export-routing": ["export-routing"]}


def one_line_error(result: Result, mentions: str) -> None:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, (OSError, ValueError))
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and mentions in lines[0], result.output


# Not conftest's `db`: a log (t.db) already holding one answered message to export.
@pytest.fixture
def db(tmp_path) -> str:
    path = str(tmp_path / "t.db")
    with Turnlog(path, clock=ManualClock(), session_ids=SequentialIds()) as t:
        t.handle_message(alice(), "hello", reply_with("hi"), lambda text: None)
    return path


@pytest.mark.parametrize("name", COMMANDS)
def test_an_existing_file_is_kept_unless_force(db, tmp_path, name):
    out = tmp_path / "out.json"
    out.write_text("precious\n")

    one_line_error(run("--db", db, *COMMANDS[name], "-o", str(out)), "exists: give --force")
    assert out.read_text() == "precious\n"

    assert run("--db", db, *COMMANDS[name], "-o", str(out), "--force").exit_code == 0
    assert json.loads(out.read_text())  # replaced by the export


@pytest.mark.parametrize("name", COMMANDS)
def test_a_symbolic_link_is_never_followed(db, tmp_path, name):
    target = tmp_path / "victim.txt"
    target.write_text("do not touch\n")
    link = tmp_path / "out.json"
    link.symlink_to(target)
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere" / "created.txt")

    for force in ([], ["--force"]):
        one_line_error(run("--db", db, *COMMANDS[name], "-o", str(link), *force), "symbolic link")
        assert target.read_text() == "do not touch\n" and link.is_symlink()
    one_line_error(run("--db", db, *COMMANDS[name], "-o", str(dangling)), "symbolic link")
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("name", COMMANDS)
def test_a_missing_directory_is_one_line(db, tmp_path, name):
    missing = tmp_path / "no" / "such" / "dir" / "out.json"
    one_line_error(run("--db", db, *COMMANDS[name], "-o", str(missing)), "no such folder")
    assert not (tmp_path / "no").exists()


def test_a_new_file_is_written_whole_with_ordinary_permissions(db, tmp_path):
    out = tmp_path / "new.json"
    result = run("--db", db, "export", KEY, "-o", str(out), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["session_key"] == KEY
    assert json.loads(result.stdout) == {"output": str(out), "format": "json", "bytes": out.stat().st_size}
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".turnlog-")] == []
