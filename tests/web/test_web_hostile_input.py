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
