"""Issue 19 items 1 and 2 (part): a reload while a request is running never closes the snapshot
that request reads; the old one is closed (its copy removed) when its last request ends, and at
most the current and one draining snapshot exist. A real server, real concurrent requests; the
slow request is held open by an event the test controls."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from web_server import WAIT_S, held, serve
from turnlog import Turnlog
from turnlog.maintenance import Maintenance
from turnlog.web.app import LOOPBACK_HOSTS, create_app


def copies(folder: str) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith("turnlog-web-"))


@pytest.fixture
def served(viewer_db):
    with serve(create_app(viewer_db.path, allowed_hosts=LOOPBACK_HOSTS)) as base:
        yield base, viewer_db.tmp, viewer_db.ids
    assert copies(viewer_db.tmp) == []  # the server's shutdown removed its copy


def test_a_reload_during_a_request_leaves_it_its_snapshot(served, monkeypatch):
    base, tmp, ids = served
    with held(monkeypatch, Turnlog, "diff") as ([entered], release), ThreadPoolExecutor(1) as pool:
        assert len(copies(tmp)) == 1
        slow = pool.submit(httpx.get, base + "/travel/diff?a=%231&b=%2340&format=json", timeout=WAIT_S)
        assert entered.wait(WAIT_S)
        reloaded = httpx.post(base + "/reload", timeout=WAIT_S)
        assert reloaded.status_code == 303, reloaded.text
        assert len(copies(tmp)) == 2  # the new one, and the one the diff still reads
        # A third snapshot is refused while the second still drains.
        again = httpx.post(base + "/reload", timeout=WAIT_S)
        assert again.status_code == 503 and "still serves 1 request" in again.text
        assert len(copies(tmp)) == 2
        fresh = httpx.get(base + "/sessions?format=json", timeout=WAIT_S)  # served by the new snapshot
        assert fresh.status_code == 200 and len(fresh.json()["sessions"]) == 3
        release.set()
        done = slow.result(timeout=WAIT_S)
    assert done.status_code == 200, done.text[:300]
    assert (done.json()["from"], done.json()["to"]) == (1, 40)
    assert len(copies(tmp)) == 1  # the drained snapshot was closed when its last request ended
    assert httpx.post(base + "/reload", timeout=WAIT_S).status_code == 303
    assert len(copies(tmp)) == 1  # nothing drains: the old one closes at once


def test_a_check_running_across_a_reload_keeps_its_snapshot(served, monkeypatch):
    base, tmp, ids = served
    with held(monkeypatch, Maintenance, "verify_chain") as ([entered], release):
        started = httpx.post(base + "/integrity/run?check=chain", timeout=WAIT_S)
        assert started.status_code == 202
        assert entered.wait(WAIT_S)
        assert httpx.post(base + "/reload", timeout=WAIT_S).status_code == 303
        assert len(copies(tmp)) == 2
        [thread] = [t for t in threading.enumerate() if t.name == "turnlog-web-chain"]
        release.set()
        thread.join(WAIT_S)
    job = httpx.get(base + f"/integrity/checks/{started.json()['id']}", timeout=WAIT_S).json()
    assert job["state"] == "done" and job["result"]["chain"] == {"breaks": []}, job
    assert len(copies(tmp)) == 1
