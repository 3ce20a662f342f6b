"""A hostile user of the viewer: odd numbers in every number a page takes, a damaged database,
and the headers every answer carries. Every bad request is a short 4xx, never a 500."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from turnlog.web.app import create_app

BASE = "http://127.0.0.1"


@pytest.fixture
def built(viewer_db):
    return viewer_db.path, viewer_db.ids


@pytest.fixture
def client(built):
    with TestClient(create_app(built[0]), base_url=BASE, raise_server_exceptions=False) as c:
        yield c


# str.isdigit() says yes to these, int() refuses the first three (superscripts, circled digits)
# and reads the last as 12 (Arabic-Indic); the viewer takes ASCII digits only.
ODD_DIGITS = ["²", "①", "1²", "١٢"]


@pytest.mark.parametrize("digits", ODD_DIGITS)
@pytest.mark.parametrize("path", ["/sessions?page={}", "/travel?page={}", "/sessions/{first}/at/{}",
                                  "/sessions/{first}/at/%23{}", "/travel?at={}", "/travel/diff?a={}"])
def test_non_ascii_digits_are_a_400(client, built, path, digits):
    url = path.format(quote(digits), first=built[1]["first"])
    r = client.get(url + ("&" if "?" in url else "?") + "format=json")
    assert r.status_code == 400, (path, digits, r.status_code, r.text[:200])
    assert r.json()["error"]


def _damage(path: str) -> None:
    with open(path, "r+b") as f:
        f.seek(5000)
        f.write(b"\xff" * 4000)


def test_a_reload_of_a_damaged_database_is_a_400_and_the_old_snapshot_stays(client, built):
    _damage(built[0])
    r = client.post("/reload?format=json", follow_redirects=False)
    assert r.status_code == 400, r.text[:300]
    assert "damaged" in r.json()["error"] and "Traceback" not in r.text
    assert client.get("/sessions").status_code == 200  # still the snapshot read before


@pytest.mark.parametrize("change", ["damaged", "deleted", "garbage"])
def test_metrics_of_a_database_that_cannot_be_read_is_a_4xx(client, built, change):
    pytest.importorskip("prometheus_client")
    if change == "damaged":
        _damage(built[0])
    elif change == "deleted":
        import os
        os.remove(built[0])
    else:
        with open(built[0], "wb") as f:
            f.write(b"not a database" * 100)
    r = client.get("/metrics")
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert "Traceback" not in r.text and len(r.text) < 1000


SECURITY = {"x-content-type-options": "nosniff", "x-frame-options": "DENY", "referrer-policy": "no-referrer"}


def test_every_answer_carries_the_security_headers(built):
    # Framed by another site, the viewer's own reload and check buttons would send its own
    # Origin (clickjacking past the same-origin gate); a ?token= URL must not leak as a Referer;
    # transcripts must not stay in a shared cache.
    first = built[1]["first"]
    app = create_app(built[0], token="s3cret", allowed_hosts=["127.0.0.1"])
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as c:
        answers = {p: c.get(p, headers={"authorization": "Bearer s3cret"}) for p in
                   ["/", f"/sessions/{first}", "/sessions?format=json", "/sessions?page=0", "/nope", "/plot.svg",
                    "/static/app.js", "/integrity/checks/nope"]}
        answers["401"] = c.get("/sessions")
        answers["bad host"] = c.get("/", headers={"host": "evil.example", "authorization": "Bearer s3cret"})
        answers["405"] = c.put("/sessions", headers={"authorization": "Bearer s3cret"})
    for name, r in answers.items():
        for header, value in SECURITY.items():
            assert r.headers.get(header) == value, (name, header, r.headers)
        csp = r.headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp, (name, csp)
        if not name.startswith("/static/"):
            assert r.headers.get("cache-control") == "no-store", (name, r.headers)
    assert answers["/"].status_code == 200 and answers["401"].status_code == 401


LONG = "x" * 20_000


@pytest.mark.parametrize("path", ["/sessions?state={}", "/sessions?page={}", "/travel?at={}", "/travel?at=%23{}",
                                  "/travel/diff?b={}", "/sessions/{first}/at/{}", "/sessions/{}",
                                  "/integrity/checks/{}"])
def test_an_error_does_not_echo_a_long_value_back(client, built, path):
    url = path.format(LONG, first=built[1]["first"])
    r = client.get(url + ("&" if "?" in url else "?") + "format=json")
    assert 400 <= r.status_code < 500
    message = r.json()["error"]
    assert len(message) <= 300 and message.endswith("characters)"), message[:400]
    shown = re.search(r'<p class="error">(.*?)</p>', client.get(url).text)
    assert shown is not None and len(shown.group(1)) <= 300  # the HTML error page, too
    assert len(client.post(f"/integrity/run?check={LONG}&format=json").json()["error"]) <= 300
