"""--db naming something that is not a regular file (a FIFO, a device) is refused with one line
at once; opening a FIFO would wait for a writer forever."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROUTE = ["route", "--platform", "telegram", "--chat-id", "42", "--user-id", "42"]


@pytest.mark.parametrize("args", [["sessions"], ROUTE, ["verify"]], ids=["read", "write", "verify"])
def test_a_fifo_is_refused_at_once(tmp_path, args):
    fifo = tmp_path / "pipe.db"
    os.mkfifo(fifo)
    try:
        # A FIFO's open blocks until a writer comes: the bound turns a hang into a failure.
        done = subprocess.run([sys.executable, "-m", "turnlog", "--db", str(fifo), *args], capture_output=True,
                              text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("turnlog waited on the FIFO")
    assert done.returncode == 1
    assert done.stderr == f"Error: {fifo} is a FIFO, not a turnlog database\n"


def test_a_device_is_refused(tmp_path):
    done = subprocess.run([sys.executable, "-m", "turnlog", "--db", os.devnull, "sessions"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr == f"Error: {os.devnull} is a device, not a turnlog database\n"
