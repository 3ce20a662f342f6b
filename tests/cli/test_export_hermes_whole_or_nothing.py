"""`turnlog export-hermes` leaves the whole home or nothing new: interrupted by Ctrl-C at a chosen
point (a real process, held there by a hook until the signal comes), or failing for want of space
(a real process under a file-size limit, as a full disk fails it)."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from turnlog import Turnlog
from chat import ALICE, BOB, collect, echo

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Imported by the child at start-up: the move named in HOLD_AT_MOVE_TO (a rename, replace or link
# onto that name) first says "held" on stderr and waits on stdin, where Ctrl-C finds it.
HOOK = '''
import os, sys
_target = os.environ.get("HOLD_AT_MOVE_TO")
if _target:
    def _holding(real):
        def move(src, dst, *args, **kwargs):
            if os.path.basename(os.fspath(dst)) == _target:
                sys.stderr.write("held\\n")
                sys.stderr.flush()
                sys.stdin.read()
            return real(src, dst, *args, **kwargs)
        return move
    os.rename, os.replace, os.link = _holding(os.rename), _holding(os.replace), _holding(os.link)
'''


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(folder.rglob("*"))}


@pytest.fixture
def source(tmp_path):
    db = tmp_path / "log" / "src.db"
    db.parent.mkdir()
    with Turnlog(str(db)) as t:
        for n in range(20):
            t.handle_message(ALICE if n % 2 else BOB, f"message {n} " + "x" * 20000, echo, collect([]))
        t.maintenance.catch_up()  # the export only reads it (a write past the limit would fail there)
    return str(db)


def child_env(tmp_path, **extra):
    hooks = tmp_path / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "sitecustomize.py").write_text(HOOK)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNLOG_")}
    env["PYTHONPATH"] = os.pathsep.join([str(hooks), REPO])
    return {**env, **extra}


def interrupted_export(tmp_path, source, home, hold_at, *extra):
    proc = subprocess.Popen([sys.executable, "-m", "turnlog", "--db", source, "export-hermes", str(home), *extra],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=child_env(tmp_path, HOLD_AT_MOVE_TO=hold_at), cwd=REPO)
    try:
        assert proc.stderr is not None
        held = proc.stderr.readline().decode()
        assert held == "held\n", held + proc.stderr.read().decode()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err.decode()


@pytest.mark.parametrize("hold_at", ["sessions.json", "state.db", "home"])
def test_ctrl_c_during_a_new_export_leaves_nothing(tmp_path, source, hold_at):
    out = tmp_path / "out"
    out.mkdir()

    code, err = interrupted_export(tmp_path, source, out / "home", hold_at)

    assert code == 130 and err == "turnlog: interrupted\n", err
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("hold_at", ["state.db"])
def test_ctrl_c_during_an_export_over_a_home_puts_its_files_back(tmp_path, source, hold_at):
    home = tmp_path / "home"
    first = subprocess.run([sys.executable, "-m", "turnlog", "--db", source, "export-hermes", str(home)],
                           env=child_env(tmp_path), cwd=REPO, capture_output=True)
    assert first.returncode == 0, first.stderr
    with Turnlog(source) as t:  # the next export differs from the home there
        t.handle_message(ALICE, "one more", echo, collect([]))
    before = snapshot(home)

    code, err = interrupted_export(tmp_path, source, home, hold_at, "--force")

    assert code == 130 and err == "turnlog: interrupted\n", err
    assert snapshot(home) == before


@pytest.mark.parametrize("limit", [40_000, 150_000, 300_000])
def test_an_export_that_runs_out_of_space_leaves_nothing(tmp_path, source, limit):
    out = tmp_path / "out"
    out.mkdir()

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    result = subprocess.run([sys.executable, "-m", "turnlog", "--db", source, "export-hermes", str(out / "home")],
                            env=child_env(tmp_path), cwd=REPO, capture_output=True, text=True,
                            preexec_fn=small_files)

    assert result.returncode == 1, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"Error: cannot write {out / 'home'}"), line
    assert list(out.iterdir()) == []
