"""`turnlog undo SESSION [N]`: the operator's /undo, with --json, refused while a turn runs."""

import json

from click.testing import CliRunner

from turnlog import ManualClock, SequentialIds, Turnlog
from turnlog.cli import main

from chat import alice, echo

KEY = "agent:main:telegram:dm:42"


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def chat(db, *texts):
    with Turnlog(db, clock=ManualClock(), session_ids=SequentialIds()) as t:
        for i, text in enumerate(texts):
            session_id = t.handle_message(alice(f"m{i}"), text, echo, lambda text: None)[0].session_id
    return session_id


def test_undo_a_key_and_a_session_with_json(tmp_path):
    db = str(tmp_path / "c.db")
    session_id = chat(db, "one", "two", "three")
    done = invoke("--db", db, "undo", KEY)
    assert done.exit_code == 0, done.output
    assert f"undid 1 turn(s) of {session_id}: messages 5..6" in done.output and "three" in done.output
    data = json.loads(invoke("--db", db, "undo", session_id, "5", "--json").output)
    assert data == {"session_id": session_id, "turns": 2, "from_seq": 1, "upto_seq": 6, "messages": 4,
                    "echoed": ["one", "two"]}
    assert invoke("--db", db, "undo", session_id).output.strip() == "nothing to undo"
    with Turnlog(db) as t:
        assert t.turns.agent_history(session_id) == []
        assert [e.actor for e in t.history(session_id) if e.event == "TurnsUndone"] == ["cli", "cli"]


def test_usage_errors_and_a_busy_session(tmp_path):
    db = str(tmp_path / "c.db")
    session_id = chat(db, "one")
    assert invoke("--db", db, "undo", session_id, "0").exit_code == 2
    missing = invoke("--db", db, "undo", "nope")
    assert missing.exit_code == 1 and "Traceback" not in missing.output
    with Turnlog(db, owner="gateway") as t:
        token = t.turns.acquire_lease(session_id, KEY)
        busy = invoke("--db", db, "undo", session_id)
        assert busy.exit_code == 1 and "a turn is running" in busy.output and len(busy.output.strip().splitlines()) == 1
        t.turns.release_lease(token)
    assert invoke("--db", db, "undo", session_id).exit_code == 0


def test_show_marks_the_undone_messages(tmp_path):
    db = str(tmp_path / "c.db")
    session_id = chat(db, "one", "two")
    assert "fate" not in invoke("--db", db, "show", session_id).output
    invoke("--db", db, "undo", session_id)
    shown = invoke("--db", db, "show", session_id)
    assert shown.exit_code == 0
    lines = shown.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["seq"])
    table = [line.split()[:5] for line in lines[header:]]
    assert table == [["seq", "timestamp", "role", "epoch", "fate"], ["1", "2026-01-01T00:00:00+00:00", "user", "1", "-"],
                     ["2", "2026-01-01T00:00:00+00:00", "assistant", "1", "-"],
                     ["3", "2026-01-01T00:00:00+00:00", "user", "2", "undone"],
                     ["4", "2026-01-01T00:00:00+00:00", "assistant", "2", "undone"]]
    data = json.loads(invoke("--db", db, "show", session_id, "--json").output)
    assert [m["fate"] for m in data["messages"]] == [None, None, "undone", "undone"]
