"""Issue 19 item 5: control characters in values that land in HTML attributes (a search query in
the filter form, a session id in its links) are escaped for attributes, never as the visible-escape
<span>, so the page's markup stays well formed."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import quote, unquote

import pytest
from starlette.testclient import TestClient

import web_db
from turnlog import ManualClock, Turnlog
from turnlog.web.app import create_app

BASE = "http://127.0.0.1"
ODD_ID = "odd\x01id\u202e"


class Elements(HTMLParser):
    """Every start tag with its attributes, and whether any markup showed up inside a value."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


def elements(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Elements()
    parser.feed(page)
    parser.close()
    return parser.found


def assert_clean_attributes(page: str) -> None:
    for tag, attrs in elements(page):
        assert tag != "span" or attrs.get("class") == "ctl", (tag, attrs)  # no tag born of a broken attribute
        for name, value in attrs.items():
            assert "<" not in (value or "") and ">" not in (value or ""), (tag, name, value)
            assert not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in value or ""), (tag, name, value)


# Not conftest's `db`: module-scoped, the web log plus a session with an odd id.
@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("attrs") / "log.db")
    web_db.build(path)
    with Turnlog(path, clock=ManualClock("2026-03-01T12:00:00+00:00"), session_ids=lambda now: ODD_ID,
                 owner="gw-odd") as t:
        src = web_db.alice()
        src.chat_id = "odd-chat"
        t.get_or_create_session(src)
    return path


@pytest.fixture(scope="module")
def client(db):
    with TestClient(create_app(db), base_url=BASE) as c:
        yield c


def test_a_query_with_a_control_character_stays_inside_the_input_value(client):
    r = client.get("/sessions?q=abc%01def")
    assert r.status_code == 200
    assert_clean_attributes(r.text)
    inputs = {a.get("id"): a for tag, a in elements(r.text) if tag == "input"}
    assert inputs["filter-q"]["value"] == "abc\\x01def"
    assert inputs["filter-q"]["name"] == "q" and inputs["filter-q"]["placeholder"].startswith("full-text")


def test_a_session_id_with_control_characters_links_percent_encoded(client):
    r = client.get("/sessions")
    assert r.status_code == 200
    assert_clean_attributes(r.text)
    hrefs = [a["href"] for tag, a in elements(r.text) if tag == "a" and a.get("class") == "session-link"]
    odd = [h for h in hrefs if "odd" in h]
    assert odd == ["/sessions/" + quote(ODD_ID, safe="")]
    followed = client.get(odd[0])
    assert followed.status_code == 200, followed.text[:300]
    assert_clean_attributes(followed.text)
    assert client.get(odd[0] + "?format=json").json()["session"]["session_id"] == ODD_ID
    events = [a["href"] for tag, a in elements(followed.text) if tag == "a" and a.get("class") == "event-link"]
    assert events and all(unquote(h).startswith(f"/sessions/{ODD_ID}/at/") for h in events)
    twin = [a["href"] for tag, a in elements(followed.text) if tag == "a" and a.get("class") == "json-twin"]
    assert twin == [odd[0] + "?format=json"]
