"""Issue 11 item 12: a fork before its session existed is refused; `diff A B` with A after B says so."""

from __future__ import annotations

import json

import pytest

from turnlog import InvalidRequest, ManualClock, SequentialIds, SessionSource, Turnlog
from harness.cli import run

from chat import alice, reply_with

BOB = SessionSource(platform="telegram", chat_id="43", user_id="43")


@pytest.fixture
def made(tmp_path):
    db = str(tmp_path / "t.db")
    with Turnlog(db, clock=ManualClock(), session_ids=SequentialIds()) as t:
        t.handle_message(alice(), "alice first", reply_with("hi alice"), lambda text: None)
        middle = t.at(t.history(t.routing_key(alice()))[-1].position).position
        bob = t.handle_message(BOB, "bob later", reply_with("hi bob"), lambda text: None)[0].session_id
        head = t.history(bob)[-1].position
    return db, bob, middle, head


def test_api_fork_before_the_session_existed_is_refused(made):
    db, bob, middle, head = made
    with Turnlog(db) as t:
        before = len(t.sessions())
        with pytest.raises(InvalidRequest, match=f"did not exist yet at #{middle}"):
            t.fork(bob, f"#{middle}")
        assert len(t.sessions()) == before  # nothing was created
        assert t.transcript(t.fork(bob, f"#{head}"))  # at or after its creation: a fork


def test_cli_fork_before_the_session_existed_is_a_usage_error_of_fork(made):
    db, bob, middle, head = made
    result = run("--db", db, "fork", bob, "--at", f"#{middle}")
    assert result.exit_code == 2
    assert "Usage: main fork [OPTIONS] SESSION_ID" in result.output
    assert f"Error: session {bob} did not exist yet at #{middle}" in result.output
    assert len(json.loads(run("--db", db, "sessions", "--json").stdout)) == 2


def test_cli_diff_with_a_after_b_says_so(made):
    db, bob, middle, head = made
    forward = run("--db", db, "diff", f"#{middle}", f"#{head}")
    backward = run("--db", db, "diff", f"#{head}", f"#{middle}")
    assert forward.exit_code == backward.exit_code == 0
    assert "after B" not in forward.stderr
    assert backward.stderr.strip() == (f"note: A (#{head} = #{head}) is after B (#{middle} = #{middle}):"
                                       f" showing the changes from #{middle} to #{head}")
    assert backward.stdout == forward.stdout  # the same changes, read from the earlier moment
    as_json = run("--db", db, "diff", f"#{head}", f"#{middle}", "--json")
    assert "is after B" in as_json.stderr and json.loads(as_json.stdout)["from"] == middle
