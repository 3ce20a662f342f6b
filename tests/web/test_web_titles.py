"""The viewer shows session titles: a column of the session list (filterable by title), a fact of
the session page, and the title as it was on the session's page as of a log position."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from turnlog import ManualClock, SequentialIds, Turnlog
from turnlog.web.app import create_app
from chat import alice, echo

BASE = "http://127.0.0.1"


@pytest.fixture
def titled(tmp_path):
    path = str(tmp_path / "log.db")
    with Turnlog(path, clock=ManualClock(), session_ids=SequentialIds()) as t:
        first = t.handle_message(alice(), "hello", echo, lambda text: None)[0].session_id
        t.command(alice(), "/title Old <name>")
        before = t.maintenance.log_head()
        t.command(alice(), "/title Garden & plans")
        branch = t.command(alice(), "/branch").session_id
    return path, first, branch, before


def test_titles_in_the_session_list_the_session_page_and_time_travel(titled):
    path, first, branch, before = titled
    with TestClient(create_app(path), base_url=BASE) as c:
        listed = c.get("/sessions", params={"format": "json"}).json()["sessions"]
        found = c.get("/sessions", params={"title": "PLANS #2", "format": "json"}).json()["sessions"]
        page = c.get(f"/sessions/{first}").text
        page_json = c.get(f"/sessions/{first}", params={"format": "json"}).json()
        then = c.get(f"/sessions/{first}/at/{before}", params={"format": "json"}).json()
        html_list = c.get("/sessions").text

    assert {r["session_id"]: r["title"] for r in listed} == {first: "Garden & plans", branch: "Garden & plans #2"}
    assert [r["session_id"] for r in found] == [branch]
    assert page_json["session"]["title"] == "Garden & plans"
    assert "Garden &amp; plans" in page and "Garden & plans" not in page  # escaped
    assert then["session"]["title"] == "Old <name>"
    assert 'id="filter-title"' in html_list and "Garden &amp; plans #2" in html_list
