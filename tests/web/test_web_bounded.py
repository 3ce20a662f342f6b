"""Issue 19 item 4 (viewer): the work behind one request is bounded. A diff that would read more
events than the viewer's limit is answered 413 naming the limit, before any event is decoded;
at most HEAVY_AT_ONCE diffs run at once (more are answered 503), and other pages answer while
they run."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from starlette.testclient import TestClient

from web_server import WAIT_S, held, serve
from turnlog import Turnlog
from turnlog.storage.log import LogReader
from turnlog.web.app import create_app

BASE = "http://127.0.0.1"
HEAVY_AT_ONCE = 2  # turnlog/web/app.py


# Not tests/conftest.py's `db`: the web log of tests/web/conftest.py's `viewer_db`.
@pytest.fixture
def db(viewer_db):
    return viewer_db.path


def test_a_diff_over_the_limit_is_413_naming_it(db, monkeypatch):
    decoded = []
    original = LogReader.decode
    monkeypatch.setattr(LogReader, "decode", lambda self, row: decoded.append(row[0]) or original(self, row))
    with TestClient(create_app(db, max_diff_events=20), base_url=BASE) as c:
        c.get("/travel/diff?a=%231&b=%2310")  # the first request catches the snapshot up
        decoded.clear()
        page = c.get("/travel/diff?a=%231&b=%2357")
        assert page.status_code == 413
        assert "reads 56 events, more than the limit of 20" in page.text and "<h1>Too large</h1>" in page.text
        assert decoded == []  # refused before any work
        twin = c.get("/travel/diff?a=%231&b=%2357&format=json")
        assert twin.status_code == 413 and twin.json()["status"] == 413
        assert "limit of 20" in twin.json()["error"]
        assert c.get("/travel/diff?a=%2337&b=%2357").status_code == 200
        key = c.get("/sessions?format=json").json()["sessions"][-1]["session_key"]  # bob's: few events
        keyed = c.get("/travel/diff", params={"a": "#1", "b": "#57", "key": key, "format": "json"})
        assert keyed.status_code == 200, keyed.text
        assert list(keyed.json()["keys"]) == [key]


def test_diffs_beyond_the_concurrent_bound_are_503_and_other_pages_answer(db, monkeypatch):
    with serve(create_app(db)) as base, held(monkeypatch, Turnlog, "diff", times=HEAVY_AT_ONCE) as (entered, release):
        with ThreadPoolExecutor(HEAVY_AT_ONCE) as pool:
            running = [pool.submit(httpx.get, base + "/travel/diff?a=%231&b=%2357&format=json", timeout=WAIT_S)
                       for _ in range(HEAVY_AT_ONCE)]
            for e in entered:
                assert e.wait(WAIT_S)
            more = httpx.get(base + "/travel/diff?a=%231&b=%2357", timeout=WAIT_S)
            assert more.status_code == 503
            assert f"{HEAVY_AT_ONCE} diffs are running already" in more.text
            for path in ("/integrity?format=json", "/sessions?format=json", "/"):
                assert httpx.get(base + path, timeout=WAIT_S).status_code == 200, path
            release.set()
            assert [r.result(timeout=WAIT_S).status_code for r in running] == [200] * HEAVY_AT_ONCE
        assert httpx.get(base + "/travel/diff?a=%231&b=%2357", timeout=WAIT_S).status_code == 200
