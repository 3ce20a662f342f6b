"""`turnlog web` serves /metrics: the live database's counts (not the pages' snapshot), under the
pages' access rules (token, loopback Host names, cross-site changes refused)."""

from __future__ import annotations

import os
import tempfile

import pytest
from starlette.testclient import TestClient

from turnlog import EngineConfig, Turnlog
from turnlog.web.app import LOOPBACK_HOSTS, create_app

from chat import alice, echo
from metrics_workload import logged, run_workload, scraped

BASE = "http://127.0.0.1"
EVIL = "http://evil.example"


@pytest.fixture
def worked(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # the viewer's snapshot copies
    db = str(tmp_path / "log.db")
    t = Turnlog(db, config=EngineConfig(delivery_max_attempts=2))
    run_workload(t)
    yield db, t
    t.close()


def test_a_scrape_shows_the_counts_the_log_holds_and_follows_the_live_file(worked):
    db, t = worked
    with TestClient(create_app(db, allowed_hosts=LOOPBACK_HOSTS), base_url=BASE) as c:
        holds = logged(t)  # reading the ledger catches the read models up, which the scrape reads
        r = c.get("/metrics")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
        assert scraped(r.text) == holds
        t.handle_message(alice("m3"), "one more", echo, lambda text: None)
        holds = logged(t)
        assert scraped(c.get("/metrics").text) == holds  # no reload: a scrape reads the live file
        assert c.get("/?format=json").status_code == 200


def test_metrics_needs_the_token_like_the_pages(worked):
    db, _ = worked
    with TestClient(create_app(db, token="s3cret"), base_url=BASE) as c:
        assert c.get("/metrics").status_code == 401
        assert c.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_a_cross_site_request_for_metrics_is_refused_like_the_pages(worked):
    db, _ = worked
    with TestClient(create_app(db, allowed_hosts=LOOPBACK_HOSTS), base_url=BASE) as c:
        for path in ("/", "/metrics"):  # a page elsewhere reaching the viewer by DNS rebinding
            assert c.get(path, headers={"host": "evil.example"}).status_code == 400
        for path in ("/reload", "/metrics"):
            r = c.post(path, headers={"origin": EVIL}, follow_redirects=False)
            assert r.status_code == 403 and "cross-site request refused" in r.text


def test_a_scrape_after_the_file_is_removed_says_so(worked):
    db, t = worked
    with TestClient(create_app(db, allowed_hosts=LOOPBACK_HOSTS), base_url=BASE) as c:
        assert c.get("/metrics").status_code == 200  # the file is open now
        os.remove(db)
        r = c.get("/metrics")
        assert r.status_code == 404 and f"the database file {db} was removed" in r.text, r.text[:300]
        assert c.get("/metrics", headers={"Accept": "application/json"}).status_code == 404


def test_a_scrape_after_the_file_is_replaced_shows_the_new_file(worked, tmp_path):
    db, t = worked
    other = str(tmp_path / "other.db")
    with Turnlog(other) as t2:
        t2.start_gateway("main")
        t2.handle_message(alice("x1"), "only this", echo, lambda text: None)
        holds = logged(t2)
    held_before = logged(t)  # reading the ledger catches the read models up, which the scrape reads
    assert holds != held_before
    t.close()  # a database is replaced when no gateway has it open (`turnlog restore` refuses otherwise)
    with TestClient(create_app(db, allowed_hosts=LOOPBACK_HOSTS), base_url=BASE) as c:
        assert scraped(c.get("/metrics").text) == held_before
        os.replace(other + ".key", db + ".key")
        os.replace(other, db)  # what a restore does: a rename over the path
        r = c.get("/metrics")
        assert r.status_code == 200, r.text[:300]
        assert scraped(r.text) == holds


def test_a_scrape_of_a_database_named_by_url_finds_its_file(worked):
    db, t = worked
    holds = logged(t)
    with TestClient(create_app("sqlite://" + db), base_url=BASE) as c:
        r = c.get("/metrics")
        assert r.status_code == 200, r.text[:300]
        assert scraped(r.text) == holds
