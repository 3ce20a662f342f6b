"""Issue 19 item 3: the viewer's snapshot copy (every transcript of the database) is readable by
its owner only, is removed when `turnlog web` is stopped by SIGTERM or SIGINT, and copies left
by viewers that died are removed at the next start."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

import httpx
import pytest
from starlette.testclient import TestClient

import web_db
from turnlog.web.app import create_app

WAIT_S = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copies(folder) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith("turnlog-web-"))


def wait_until_serving(proc: subprocess.Popen, base: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while True:  # a subprocess offers nothing to wait on but its port; bounded
        assert proc.poll() is None, proc.communicate()[1]
        try:
            httpx.get(base + "/plot.svg", timeout=5).raise_for_status()
            return
        except httpx.TransportError:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_viewer_leaves_no_copy_and_its_copy_is_private(tmp_path, sig):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    db = str(tmp_path / "log.db")
    web_db.build(db)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "turnlog", "--db", db, "web", "--port", str(port),
                             "--max-diff-events", "5"],
                            env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_serving(proc, base)
        too_long = httpx.get(base + "/travel/diff?a=%231&b=%2320", timeout=WAIT_S)
        assert too_long.status_code == 413 and "more than the limit of 5" in too_long.text
        [folder] = copies(tmp)
        assert folder.startswith(f"turnlog-web-{proc.pid}-")  # named by pid: a later start can tell it is stale
        path = tmp / folder
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
        files = sorted(path.iterdir())
        assert files and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files), \
            [(f.name, oct(f.stat().st_mode)) for f in files]
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert copies(tmp) == [], err
    assert "Traceback" not in err


def test_copies_of_dead_viewers_are_removed_at_the_next_start(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    db = str(tmp_path / "log.db")
    web_db.build(db)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp / f"turnlog-web-{dead.pid}-abc123").mkdir()
    (tmp / f"turnlog-web-{dead.pid}-abc123" / "snapshot.db").write_bytes(b"transcripts")
    alive = tmp / f"turnlog-web-{os.getppid()}-def456"  # a viewer still running
    alive.mkdir()
    unrelated = tmp / "turnlog-web-notapid"
    unrelated.mkdir()
    with TestClient(create_app(db), base_url="http://127.0.0.1") as c:
        assert c.get("/").status_code == 200
        left = copies(tmp)
        assert f"turnlog-web-{dead.pid}-abc123" not in left
        assert alive.name in left and unrelated.name in left
        assert len([n for n in left if n.startswith(f"turnlog-web-{os.getpid()}-")]) == 1
    assert sorted(copies(tmp)) == sorted([alive.name, unrelated.name])
