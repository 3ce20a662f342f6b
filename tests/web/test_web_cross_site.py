"""Issue 19 item 2: state-changing requests from other sites are refused with 403; one running
check per kind, and a bounded list of checks."""

from __future__ import annotations

import threading

import pytest
from starlette.testclient import TestClient

from web_server import WAIT_S, held
from turnlog.maintenance import Maintenance
from turnlog.web.app import LOOPBACK_HOSTS, create_app
KEPT = 20  # the checks the viewer remembers (turnlog/web/checks.py)

BASE = "http://127.0.0.1"
EVIL = "http://evil.example"


@pytest.fixture
def client(viewer_db):
    with TestClient(create_app(viewer_db.path, allowed_hosts=LOOPBACK_HOSTS), base_url=BASE) as c:
        yield c


CROSS_SITE = [{"origin": EVIL}, {"origin": "null"}, {"referer": EVIL + "/page"},
              {"origin": "http://127.0.0.1:9999"},  # another port on this machine is another origin
              {"sec-fetch-site": "cross-site"}, {"sec-fetch-site": "same-site"},
              {"origin": EVIL, "referer": BASE + "/"}]


@pytest.mark.parametrize("headers", CROSS_SITE)
@pytest.mark.parametrize("path", ["/reload", "/integrity/run?check=chain", "/integrity/run?check=verify"])
def test_a_cross_site_post_is_refused(client, headers, path):
    r = client.post(path, headers=headers, follow_redirects=False)
    assert r.status_code == 403, (headers, r.status_code)
    assert "cross-site request refused" in r.text
    assert client.get("/integrity?format=json").json()["checks"] == []  # nothing started


def test_a_same_origin_post_is_served(client):
    assert client.post("/reload", headers={"origin": BASE}, follow_redirects=False).status_code == 303
    assert client.post("/reload", headers={"referer": BASE + "/sessions", "sec-fetch-site": "same-origin"},
                       follow_redirects=False).status_code == 303
    assert client.post("/reload", follow_redirects=False).status_code == 303  # not a browser (curl, scripts)


def test_one_running_check_per_kind(client, monkeypatch):
    with held(monkeypatch, Maintenance, "verify_chain") as ([entered], release):
        first = client.post("/integrity/run?check=chain", headers={"origin": BASE})
        assert first.status_code == 202
        assert entered.wait(WAIT_S)
        again = [client.post("/integrity/run?check=chain", headers={"origin": BASE}) for _ in range(10)]
        assert {r.status_code for r in again} == {200}
        assert {r.json()["id"] for r in again} == {first.json()["id"]}
        threads = [t for t in threading.enumerate() if t.name == "turnlog-web-chain"]
        assert len(threads) == 1
        release.set()
        threads[0].join(WAIT_S)
    assert [c["state"] for c in client.get("/integrity?format=json").json()["checks"]] == ["done"]


def test_the_list_of_checks_is_bounded(client):
    for _ in range(KEPT + 15):
        r = client.post("/integrity/run?check=chain")
        assert r.status_code == 202
        for t in [t for t in threading.enumerate() if t.name == "turnlog-web-chain"]:
            t.join(WAIT_S)
    checks = client.get("/integrity?format=json").json()["checks"]
    assert len(checks) == KEPT and {c["state"] for c in checks} == {"done"}
