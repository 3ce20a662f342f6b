"""One rule for every answer, errors included: a client asking for JSON (`?format=json`, or
`Accept: application/json`) gets a JSON body, a browser gets the HTML page."""

from __future__ import annotations

import tempfile

import pytest
from starlette.testclient import TestClient

import web_db
from turnlog.web.app import create_app

BASE = "http://127.0.0.1"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
JSON = "application/json"

# Every kind of 404 the viewer answers: an unknown session (and its time travel), an unknown
# check, no such page, no such static file.
MISSING = ["/sessions/20990101_000000_nope", "/sessions/nope/at/3", "/integrity/checks/nope", "/nope",
           "/static/nope.css"]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    folder = tmp_path_factory.mktemp("negotiation")
    db = str(folder / "log.db")
    web_db.build(db)
    saved, tempfile.tempdir = tempfile.tempdir, str(folder)
    try:
        with TestClient(create_app(db), base_url=BASE) as c:
            yield c
    finally:
        tempfile.tempdir = saved


@pytest.mark.parametrize("path", MISSING)
def test_a_404_asked_for_as_json_is_json(client, path):
    for r in (client.get(path, headers={"Accept": JSON}), client.get(path + "?format=json")):
        assert r.status_code == 404 and r.headers["content-type"] == "application/json", (path, r.text[:200])
        assert r.json()["status"] == 404 and r.json()["error"]


@pytest.mark.parametrize("path", MISSING)
def test_a_404_asked_for_by_a_browser_is_the_html_page(client, path):
    for accept in (BROWSER, "*/*"):
        r = client.get(path, headers={"Accept": accept})
        assert r.status_code == 404 and r.headers["content-type"].startswith("text/html"), (path, r.text[:200])
        assert "<h1>Not found</h1>" in r.text


def test_the_other_errors_and_pages_follow_the_same_rule(client):
    wrong_method = client.get("/reload", headers={"Accept": JSON})
    assert wrong_method.status_code == 405 and wrong_method.json()["status"] == 405
    assert "POST" in wrong_method.headers["allow"]
    assert "<h1>Method not allowed</h1>" in client.get("/reload", headers={"Accept": BROWSER}).text
    bad = client.post("/integrity/run?check=bogus", headers={"Accept": JSON})
    assert bad.status_code == 400 and "unknown check" in bad.json()["error"]
    page = client.get("/sessions", headers={"Accept": JSON})
    assert page.headers["content-type"] == "application/json" and "sessions" in page.json()
    # Rated below HTML, JSON is not what is asked for.
    assert client.get("/sessions", headers={"Accept": "application/json;q=0.5, text/html"}).text.startswith("<!doctype")
