"""`turnlog title SESSION [TEXT]`: the operator's /title, with --json; `sessions` and `show` print
the title and `sessions --title` finds sessions by it."""

from __future__ import annotations

import json

from turnlog import ManualClock, SequentialIds, Turnlog
from harness.cli import run, ok
from chat import alice, echo


def two_sessions(db):
    with Turnlog(db, clock=ManualClock(), session_ids=SequentialIds()) as t:
        first = t.handle_message(alice(), "hello", echo, lambda text: None)[0].session_id
        t.command(alice(), "/new")
        second = t.handle_message(alice(), "again", echo, lambda text: None)[0].session_id
    return first, second


def test_title_sets_and_shows_a_title(tmp_path):
    db = str(tmp_path / "t.db")
    first, _ = two_sessions(db)

    assert ok("--db", db, "title", first).output == "(no title)\n"
    set_ = json.loads(ok("--db", db, "title", first, "Quarterly  plan", "--json").output)
    shown = json.loads(ok("--db", db, "title", first, "--json").output)

    assert set_ == {"session_id": first, "title": "Quarterly plan", "previous_title": None, "changed": True}
    assert shown == {"session_id": first, "title": "Quarterly plan"}
    assert ok("--db", db, "title", first).output == "Quarterly plan\n"
    with Turnlog(db) as t:
        [event] = [h for h in t.history(first) if h.event == "SessionTitled"]
        assert (event.actor, event.cause) == ("cli", "cli:title")


def test_title_of_a_routing_key_names_its_current_session(tmp_path):
    db = str(tmp_path / "t.db")
    _, second = two_sessions(db)
    with Turnlog(db) as t:
        key = t.routing_key(alice())

    out = json.loads(ok("--db", db, "title", key, "current one", "--json").output)

    assert out["session_id"] == second and out["title"] == "current one"


def test_a_refused_title_is_a_one_line_usage_error(tmp_path):
    db = str(tmp_path / "t.db")
    first, second = two_sessions(db)
    ok("--db", db, "title", first, "taken")

    held = run("--db", db, "title", second, "taken")
    too_long = run("--db", db, "title", second, "x" * 101)
    missing = run("--db", db, "title", "no-such-session", "x")

    assert held.exit_code == 2 and "Error: Title 'taken' is already in use by another session." in held.output
    assert too_long.exit_code == 2 and "Title too long (101 chars, max 100)" in too_long.output
    assert missing.exit_code == 1 and missing.output.strip().count("\n") == 0
    assert "Traceback" not in held.output + too_long.output + missing.output


def test_clear_removes_the_title(tmp_path):
    db = str(tmp_path / "t.db")
    first, _ = two_sessions(db)
    ok("--db", db, "title", first, "gone soon")

    out = json.loads(ok("--db", db, "title", first, "--clear", "--json").output)

    assert out == {"session_id": first, "title": None, "previous_title": "gone soon", "changed": True}
    assert run("--db", db, "title", first, "x", "--clear").exit_code == 2


def test_sessions_and_show_print_the_title_and_sessions_filters_by_it(tmp_path):
    db = str(tmp_path / "t.db")
    first, second = two_sessions(db)
    ok("--db", db, "title", first, "Budget review")

    listed = json.loads(ok("--db", db, "sessions", "--json").output)
    found = json.loads(ok("--db", db, "sessions", "--title", "BUDGET", "--json").output)
    shown = ok("--db", db, "show", first).output

    assert {r["session_id"]: r["title"] for r in listed} == {first: "Budget review", second: None}
    assert [r["session_id"] for r in found] == [first]
    assert "title:             Budget review" in shown
    assert "Budget review" in ok("--db", db, "sessions").output


def test_showing_a_title_only_reads(tmp_path):
    db = tmp_path / "t.db"
    first, _ = two_sessions(str(db))
    ok("--db", str(db), "title", first, "kept")
    db.chmod(0o444)
    try:
        assert ok("--db", str(db), "title", first).output.splitlines()[-1] == "kept"  # after a staleness note
        refused = run("--db", str(db), "title", first, "changed")
        assert refused.exit_code == 1 and "Traceback" not in refused.output
    finally:
        db.chmod(0o644)
