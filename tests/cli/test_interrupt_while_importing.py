"""Ctrl-C in the first tenths of a second of `turnlog`, while Python imports turnlog: the console
script's entry point (pyproject.toml) says `turnlog: interrupted`, exit 130, as for any other
interrupt, not Python's traceback. A real process, held inside the import by a hook until the
signal comes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import turnlog_main
from turnlog.cli.base import INTERRUPTED

REPO = Path(__file__).resolve().parents[2]

# Imported by the child at start-up: the import of HOLD_IMPORT_OF says "importing" on stderr and
# waits on stdin, where Ctrl-C finds it.
HOOK = '''
import os, sys
class _Hold:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["HOLD_IMPORT_OF"]:
            sys.meta_path.remove(self)
            sys.stderr.write("importing\\n")
            sys.stderr.flush()
            sys.stdin.read()
        return None
if os.environ.get("HOLD_IMPORT_OF"):
    sys.meta_path.insert(0, _Hold())
'''


def console_script(*args: str) -> list[str]:
    """What the installed `turnlog` script runs: the entry point pyproject.toml names."""
    target = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["turnlog"]
    module, function = target.split(":")
    return [sys.executable, "-c", f"import sys; from {module} import {function}; sys.exit({function}())", *args]


def child_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "sitecustomize.py").write_text(HOOK)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNLOG_")}
    return {**env, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]), **extra}


def test_ctrl_c_while_turnlog_is_imported_is_one_line_and_exit_130(tmp_path):
    proc = subprocess.Popen(console_script("--db", str(tmp_path / "t.db"), "sessions"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=child_env(tmp_path, HOLD_IMPORT_OF="turnlog.api"), cwd=tmp_path)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline().decode()
        assert first == "importing\n", first + proc.stderr.read().decode()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err.decode()
    assert (out, err) == (b"", b"turnlog: interrupted\n")
    assert os.listdir(tmp_path) == ["sitecustomize.py"]


def test_the_console_script_runs_commands(tmp_path):
    result = subprocess.run(console_script("--db", str(tmp_path / "t.db"), "sessions", "--json"),
                            env=child_env(tmp_path), cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 1 and "no turnlog database" in result.stderr, result.stderr


def test_the_entry_point_exits_as_the_cli_does_on_an_interrupt():
    assert turnlog_main.INTERRUPTED == INTERRUPTED
