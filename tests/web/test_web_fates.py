"""The viewer's transcript marks what became of each message: undone and retried rows are shown,
flagged as out of the agent's history; compacted ones as standing behind a summary."""

from __future__ import annotations

from starlette.testclient import TestClient

from turnlog import ManualClock, SequentialIds, Turnlog
from turnlog.web.app import create_app

from chat import alice, echo


def test_the_transcript_marks_undone_retried_and_compacted_messages(tmp_path):
    path = str(tmp_path / "log.db")
    with Turnlog(path, clock=ManualClock(), session_ids=SequentialIds()) as t:
        for i, text in enumerate(["one", "two", "three", "four"]):
            session_id = t.handle_message(alice(f"m{i}"), text, echo, lambda text: None)[0].session_id
        t.compact(session_id, summary="the first turn", keep_turns=3)
        t.command(alice("u1"), "/undo")
        t.command(alice("r1"), "/retry")
        t.run_next(alice(), echo, lambda text: None)
    with TestClient(create_app(path), base_url="http://127.0.0.1") as client:
        html = client.get(f"/sessions/{session_id}").text
        data = client.get(f"/sessions/{session_id}?format=json").json()
    assert [(m["seq"], m["fate"]) for m in data["messages"]] == [
        (1, "compacted"), (2, "compacted"), (3, None), (4, None), (5, "retried"), (6, "retried"),
        (7, "undone"), (8, "undone"), (9, None), (10, None)]
    assert html.count('class="msg role-user fate-undone"') == 1 and html.count("fate-retried") == 2
    assert html.count("undone: not in the agent&#x27;s history") == 2
    assert html.count("fate-compacted") == 2 and "a summary stands for it" in html
