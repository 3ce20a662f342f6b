"""The viewer after an erase: the subject's words and ids read "[erased]" on its session page, in
the session list and in search, and every page still loads."""

from __future__ import annotations

from starlette.testclient import TestClient

from turnlog import ManualClock, SequentialIds, Turnlog
from turnlog.web.app import create_app

from chat import alice, collect, echo

PHRASE = "juniper telescope 5150"


def test_the_viewer_shows_erased_for_an_erased_subject(tmp_path):
    db = str(tmp_path / "erased.db")
    with Turnlog(db, clock=ManualClock(), session_ids=SequentialIds()) as t:
        t.handle_message(alice(user_name="juniperfan"), PHRASE, echo, collect([]))
        session_id = t.session(alice()).session_id
        t.erase_subject("telegram:42", actor="operator", cause="erase request")
    with TestClient(create_app(db), base_url="http://127.0.0.1") as client:
        for path in (f"/sessions/{session_id}", "/sessions", "/sessions?q=juniper", "/travel", "/integrity"):
            page = client.get(path)
            assert page.status_code == 200, (path, page.text)
            assert PHRASE not in page.text and "juniperfan" not in page.text, path
        assert "[erased]" in client.get(f"/sessions/{session_id}").text
        data = client.get(f"/sessions/{session_id}?format=json").json()
        assert "[erased]" in str(data) and PHRASE not in str(data)
