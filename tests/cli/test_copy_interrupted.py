"""Ctrl-C during `turnlog copy`: exit 130, one line saying how much was copied and that running
the same command again resumes; the next run goes on from there."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import sys

from turnlog import Turnlog
from chat import ALICE, collect, echo
from harness.cli import run

F_SETPIPE_SZ = 1031  # Linux: a pipe this small fills after a few dozen progress lines
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_ctrl_c_during_a_copy_says_how_much_was_copied_and_how_to_resume(tmp_path):
    source, target = str(tmp_path / "src.db"), str(tmp_path / "dst.db")
    with Turnlog(source) as t:
        for n in range(120):
            t.handle_message(ALICE, f"message {n}", echo, collect([]))
        head = t.maintenance.log_head()
    assert head > 1000  # a progress line an event: far more than the pipe holds, so the copy
    # cannot finish before the signal, whenever it comes: it blocks on its stderr until read
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, F_SETPIPE_SZ, 4096)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNLOG_")}
    proc = subprocess.Popen([sys.executable, "-m", "turnlog", "--db", source, "copy", "--to", target,
                             "--batch", "1", "--progress-every", "1"],
                            stdout=subprocess.DEVNULL, stderr=write_end, env=env, cwd=REPO)
    os.close(write_end)
    err = b""
    try:
        while b"\n" not in err:  # the first event is copied
            chunk = os.read(read_end, 64)
            assert chunk, err
            err += chunk
        assert err.startswith(b"copy: 1 of "), err
        proc.send_signal(signal.SIGINT)
        while chunk := os.read(read_end, 65536):
            err += chunk
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(read_end)

    assert proc.returncode == 130, err
    last = err.decode().splitlines()[-1]
    match = re.fullmatch(r"turnlog: interrupted: (\d+) events copied; run the same command again to resume", last)
    assert match, err.decode()[-500:]
    copied = int(match.group(1))
    assert 1 <= copied < head
    assert "Traceback" not in err.decode()

    again = run("--db", source, "copy", "--to", target)

    assert again.exit_code == 0, again.output
    # An interrupt just after a batch's commit, before it was counted, copied one batch more.
    resumed = re.search(rf"copied (\d+) events to {re.escape(target)}, resumed after position (\d+)", again.stdout)
    assert resumed, again.stdout
    assert int(resumed.group(2)) in (copied, copied + 1) and int(resumed.group(1)) == head - int(resumed.group(2))
    assert f"verified: {head} events through position {head} match the source" in again.stdout
