"""Issue 11 item 11: chat `a:b` + user `c` and chat `a` + user `b:c` are two routes with one key string.
export-routing refuses naming both route ids; every command taking a KEY takes a route id too and says
when a key string is ambiguous."""

from __future__ import annotations

import json

import pytest

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog
from harness.cli import run

ONE = SessionSource(platform="telegram", chat_type="group", chat_id="a:b", user_id="c")
TWO = SessionSource(platform="telegram", chat_type="group", chat_id="a", user_id="b:c")
KEY = "agent:main:telegram:group:a:b:c"



@pytest.fixture
def colliding(tmp_path):
    db = str(tmp_path / "t.db")
    with Turnlog(db, clock=ManualClock(), session_ids=SequentialIds()) as t:
        one = t.handle_message(ONE, "apple from one", lambda h, i: "re one", lambda s: None)[0].session_id
        two = t.handle_message(TWO, "apple from two", lambda h, i: "re two", lambda s: None)[0].session_id
        ids = {r.session_id: r.route_id for r in t.routes()}
        assert t.routing_key(ONE) == t.routing_key(TWO) == KEY and len(ids) == 2
    return db, (one, ids[one]), (two, ids[two])


def test_export_routing_refuses_naming_the_colliding_route_ids(colliding):
    db, (_, route_one), (_, route_two) = colliding
    result = run("--db", db, "export-routing")
    assert result.exit_code == 1 and "Traceback" not in result.output
    [line] = [line for line in result.output.splitlines() if line]
    assert line.startswith("Error: routing key 'agent:main:telegram:group:a:b:c' names 2 routes")
    assert route_one in line and route_two in line


def test_a_key_string_naming_two_routes_is_refused_with_their_ids(colliding):
    db, (_, route_one), (_, route_two) = colliding
    for args in (["history", KEY], ["show", KEY], ["queue", KEY], ["suspend", KEY]):
        result = run("--db", db, *args)
        assert result.exit_code == 2, (args, result.output)
        error = [line for line in result.output.splitlines() if line.startswith("Error")][0]
        assert "names 2 routes" in error and route_one in error and route_two in error, args
        assert f"Usage: main {args[0]} " in result.output


def test_a_route_id_names_one_route_wherever_a_key_is_taken(colliding):
    db, (one, route_one), (two, route_two) = colliding
    history = json.loads(run("--db", db, "history", route_one, "--json").stdout)
    assert {e["session_id"] for e in history if e["session_id"]} == {one}
    assert json.loads(run("--db", db, "show", route_two, "--json").stdout)["session_id"] == two
    assert run("--db", db, "queue", route_one, "--json").exit_code == 0
    assert run("--db", db, "suspend", route_two).exit_code == 0
    assert json.loads(run("--db", db, "show", two, "--json").stdout)["suspended"] is True
    assert json.loads(run("--db", db, "show", one, "--json").stdout)["suspended"] is False
    switched = run("--db", db, "switch", route_one, two, "--force", "--json")
    assert switched.exit_code == 0 and json.loads(switched.stdout)["session_id"] == two


def test_a_key_filter_says_when_its_key_string_is_ambiguous(colliding):
    db, (one, route_one), (two, route_two) = colliding
    result = run("--db", db, "search", "apple", "--key", route_one, "--json")
    assert result.exit_code == 0
    assert {h["session_id"] for h in json.loads(result.stdout)} == {one, two}
    assert "names 2 routes" in result.stderr and route_one in result.stderr and route_two in result.stderr
