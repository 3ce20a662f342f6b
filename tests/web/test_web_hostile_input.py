"""A hostile user of the viewer: odd numbers in every number a page takes, a damaged database,
and the headers every answer carries. Every bad request is a short 4xx, never a 500."""

from __future__ import annotations

import tempfile
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

import web_db
from turnlog.web.app import create_app

BASE = "http://127.0.0.1"


@pytest.fixture
def built(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    path = str(tmp_path / "log.db")
    return path, web_db.build(path)


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
