"""Export (Hermes' export shape, docs/behaviour.md §10) and fork, at the public surface (API and CLI).

Transcripts are written the way an agent loop writes them: `acquire_lease`, then `append_message`
for the user message, an assistant message with tool calls, the tool's result (tool_call_id and
name) and the final answer; compression is `rotate_session(token, source)`. Time is a ManualClock
moved between messages, so every timestamp in an export is known.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from turnlog import ManualClock, NotFound, SessionSource, Turnlog
from turnlog.cli import main as cli

from chat import alice, echo

SLACK = SessionSource(platform="slack", chat_type="thread", chat_id="C1", thread_id="T9", user_id="U1",
                      user_name="alice", scope_id="W1", chat_name="general")
SLACK_KEY = "agent:main:slack:thread:W1:C1:T9"
KEY = "agent:main:telegram:dm:42"
T0 = "2026-03-01T10:00:00+00:00"

WEATHER_CALL = {"id": "call_1", "type": "function",
                "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}}
TIME_CALL = {"id": "call_2", "type": "function", "function": {"name": "clock", "arguments": "{}"}}


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


@pytest.fixture
def t(make_turnlog):
    return make_turnlog(clock=ManualClock(T0), owner="gw-1")


def at_second(t: Turnlog, second: int) -> str:
    when = f"2026-03-01T10:00:{second:02d}+00:00"
    t._clock.set(when)
    return when


def tool_turn(t: Turnlog, source: SessionSource = SLACK) -> tuple[str, list[str]]:
    """A turn with a tool call, messages one second apart; returns the session id and their times."""
    r = t.get_or_create_session(source)
    times = [at_second(t, 1)]
    token = t.turns.acquire_lease(r.session_id, r.session_key)
    t.turns.append_message(token, "user", "what's the weather in Oslo, and the time?", platform_message_id="slack-1",
                     token_count=11)
    times.append(at_second(t, 2))
    t.turns.append_message(token, "assistant", "", tool_calls=[WEATHER_CALL, TIME_CALL], finish_reason="tool_calls",
                     token_count=24)
    times.append(at_second(t, 3))
    t.turns.append_message(token, "tool", "{\"temp\": 3}", tool_call_id="call_1", name="weather")
    times.append(at_second(t, 4))
    t.turns.append_message(token, "tool", "10:00", tool_call_id="call_2", name="clock")
    times.append(at_second(t, 5))
    t.turns.append_message(token, "assistant", "It is 3 degrees in Oslo at 10:00.", finish_reason="stop", token_count=9)
    t.turns.release_lease(token)
    return r.session_id, times


# -- export of one session ----------------------------------------------------------------------------

SESSION_FIELDS = ["id", "source", "user_id", "session_key", "chat_id", "chat_type", "thread_id", "display_name",
                  "parent_session_id", "started_at", "ended_at", "end_reason", "message_count", "tool_call_count",
                  "messages"]
MESSAGE_FIELDS = ["role", "content", "tool_call_id", "tool_calls", "tool_name", "timestamp", "token_count",
                  "finish_reason", "platform_message_id"]


def test_export_has_the_spec_fields_with_what_was_appended(t):
    sid, times = tool_turn(t)
    exported = t.export(sid)
    assert set(SESSION_FIELDS) <= set(exported)
    assert {k: exported[k] for k in SESSION_FIELDS if k != "messages"} == {
        "id": sid, "source": "slack", "user_id": "U1", "session_key": SLACK_KEY, "chat_id": "C1",
        "chat_type": "thread", "thread_id": "T9", "display_name": "general", "parent_session_id": None,
        "started_at": epoch(T0), "ended_at": None, "end_reason": None, "message_count": 5, "tool_call_count": 2}
    assert [{k: m[k] for k in MESSAGE_FIELDS} for m in exported["messages"]] == [
        {"role": "user", "content": "what's the weather in Oslo, and the time?", "tool_call_id": None,
         "tool_calls": None, "tool_name": None, "timestamp": epoch(times[0]), "token_count": 11,
         "finish_reason": None, "platform_message_id": "slack-1"},
        {"role": "assistant", "content": "", "tool_call_id": None, "tool_calls": [WEATHER_CALL, TIME_CALL],
         "tool_name": None, "timestamp": epoch(times[1]), "token_count": 24, "finish_reason": "tool_calls",
         "platform_message_id": None},
        {"role": "tool", "content": "{\"temp\": 3}", "tool_call_id": "call_1", "tool_calls": None,
         "tool_name": "weather", "timestamp": epoch(times[2]), "token_count": None, "finish_reason": None,
         "platform_message_id": None},
        {"role": "tool", "content": "10:00", "tool_call_id": "call_2", "tool_calls": None, "tool_name": "clock",
         "timestamp": epoch(times[3]), "token_count": None, "finish_reason": None, "platform_message_id": None},
        {"role": "assistant", "content": "It is 3 degrees in Oslo at 10:00.", "tool_call_id": None,
         "tool_calls": None, "tool_name": None, "timestamp": epoch(times[4]), "token_count": 9,
         "finish_reason": "stop", "platform_message_id": None},
    ]
    assert [(m["id"], m["session_id"]) for m in exported["messages"]] == [(n, sid) for n in range(1, 6)]


def test_the_spec_example_counts_three_messages_and_one_tool_call(t):
    r = t.get_or_create_session(alice(user_name="alice"))
    token = t.turns.acquire_lease(r.session_id, r.session_key)
    t.turns.append_message(token, "user", "weather?")
    t.turns.append_message(token, "assistant", "", tool_calls=[WEATHER_CALL])
    t.turns.append_message(token, "tool", "{\"temp\": 3}", tool_call_id="call_1", name="weather")
    t.turns.release_lease(token)
    exported = t.export(r.session_id)
    assert (exported["message_count"], exported["tool_call_count"]) == (3, 1)
    assert isinstance(exported["messages"][1]["tool_calls"][0], dict)  # decoded, not a JSON string


def test_export_by_key_is_the_current_session_and_an_ended_one_has_its_end(t):
    first = t.handle_message(alice("m1", user_name="alice"), "hello", echo, lambda text: None)[0].session_id
    assert t.export(KEY)["id"] == first
    t._clock.set("2026-03-01T10:05:00+00:00")
    t.command(alice("m2", user_name="alice"), "/new")
    t._clock.set("2026-03-01T10:06:00+00:00")
    second = t.handle_message(alice("m3", user_name="alice"), "again", echo, lambda text: None)[0].session_id
    ended = t.export(first)
    assert (ended["ended_at"], ended["end_reason"]) == (epoch("2026-03-01T10:05:00+00:00"), "session_reset")
    assert [m["content"] for m in ended["messages"]] == ["hello", "re: hello"]
    assert t.export(KEY)["id"] == second
    assert t.export(KEY)["display_name"] == "alice"
    with pytest.raises(NotFound):
        t.export("agent:main:telegram:dm:nobody")


# -- lineage across compression -------------------------------------------------------------------------

def compressed_twice(t: Turnlog) -> tuple[list[str], list[list[str]]]:
    """Root (5 messages) -> child (2) -> tip (1), rotated during turns; ids and contents per segment."""
    root, _ = tool_turn(t)
    at_second(t, 10)
    token = t.turns.acquire_lease(root, SLACK_KEY)
    t.turns.append_message(token, "user", "and tomorrow?")
    at_second(t, 11)
    token = t.turns.rotate_session(token, SLACK)
    child = token.session_id
    t.turns.append_message(token, "assistant", "[summary] weather chat; tomorrow: rain")
    t.turns.append_message(token, "assistant", "Tomorrow: rain.")
    t.turns.release_lease(token)
    at_second(t, 20)
    token = t.turns.acquire_lease(child, SLACK_KEY)
    at_second(t, 21)
    token = t.turns.rotate_session(token, SLACK)
    tip = token.session_id
    t.turns.append_message(token, "assistant", "[summary] two days of weather")
    t.turns.release_lease(token)
    contents = [[m["content"] for m in t.transcript(s)] for s in (root, child, tip)]
    assert [len(c) for c in contents] == [6, 2, 1]
    return [root, child, tip], contents


def test_lineage_export_concatenates_the_segments_root_to_tip(t):
    ids, contents = compressed_twice(t)
    root, child, tip = ids
    exported = t.export(SLACK_KEY, lineage=True)
    assert exported["lineage_session_ids"] == ids
    assert exported["message_count"] == 9
    assert [m["content"] for m in exported["messages"]] == [c for seg in contents for c in seg]
    assert [m["session_id"] for m in exported["messages"]] == [root] * 6 + [child] * 2 + [tip]
    assert exported["id"] == tip and exported["tool_call_count"] == 0  # the tip's own row
    segments = exported["segments"]
    assert [(s["id"], s["parent_session_id"], s["end_reason"], s["message_count"], s["tool_call_count"])
            for s in segments] == [(root, None, "compression", 6, 2), (child, root, "compression", 2, 0),
                                   (tip, child, None, 1, 0)]
    assert [s["ended_at"] for s in segments] == [epoch("2026-03-01T10:00:11+00:00"),
                                                 epoch("2026-03-01T10:00:21+00:00"), None]
    assert all("messages" not in s for s in segments)


def test_the_same_lineage_from_any_of_its_sessions(t):
    ids, _ = compressed_twice(t)
    whole = t.export(SLACK_KEY, lineage=True)
    for sid in ids:
        assert t.export(sid, lineage=True) == whole


def test_a_session_never_rotated_is_its_own_lineage(t):
    sid, _ = tool_turn(t)
    exported = t.export(sid, lineage=True)
    assert exported["lineage_session_ids"] == [sid]
    assert exported["message_count"] == 5 and exported["messages"] == t.export(sid)["messages"]


def test_a_forks_lineage_does_not_repeat_its_parents_messages(t):
    sid, _ = tool_turn(t)
    third = [h.position for h in t.history(sid, types=["MessageAppended"])][2]
    fork = t.fork(sid, f"#{third}")
    exported = t.export(fork, lineage=True)
    assert exported["lineage_session_ids"] == [fork]
    assert exported["message_count"] == 3
    assert [m["content"] for m in exported["messages"]] == [m["content"] for m in t.transcript(sid)][:3]
    assert t.export(sid, lineage=True)["lineage_session_ids"] == [sid]  # a fork is no compression child


# -- export through the CLI -----------------------------------------------------------------------------

def run(db: Path, *args: str):
    return CliRunner().invoke(cli, ["--db", str(db), *args], env={"TURNLOG_DB": None, "TURNLOG_DEBUG": None})


def ok(db: Path, *args: str):
    result = run(db, *args)
    assert result.exit_code == 0, result.output
    return result


def roundtrip(value: Any) -> Any:
    return json.loads(json.dumps(value))


def test_cli_export_json_is_the_api_export(t, db):
    sid, _ = tool_turn(t)
    assert json.loads(ok(db, "export", sid).stdout) == roundtrip(t.export(sid))
    assert json.loads(ok(db, "export", SLACK_KEY, "--format", "json").stdout) == roundtrip(t.export(sid))


def test_cli_export_jsonl_is_one_session_per_line(t, db):
    ids, contents = compressed_twice(t)
    single = ok(db, "export", ids[0], "--format", "jsonl").stdout.splitlines()
    assert len(single) == 1 and json.loads(single[0]) == roundtrip(t.export(ids[0]))
    lines = ok(db, "export", SLACK_KEY, "--lineage", "--format", "jsonl").stdout.splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["id"] for r in rows] == ids
    assert [[m["content"] for m in r["messages"]] for r in rows] == contents
    assert [r["message_count"] for r in rows] == [6, 2, 1]
    assert rows[0]["messages"][1]["tool_calls"] == [WEATHER_CALL, TIME_CALL]


def test_cli_export_markdown_reads_as_a_conversation(t, db):
    ids, _ = compressed_twice(t)
    root, child, tip = ids
    text = ok(db, "export", SLACK_KEY, "--lineage", "--format", "markdown").stdout
    lines = text.splitlines()
    assert lines[0] == f"# Session {tip}"
    assert f"- key: `{SLACK_KEY}`" in lines and "- platform: slack" in lines and "- messages: 9" in lines
    assert f"- lineage: {root} → {child} → {tip}" in lines
    assert lines.index(f"**user** ({root} #1)") < lines.index("It is 3 degrees in Oslo at 10:00.") < lines.index(
        f"**assistant** ({tip} #1)")
    assert "[summary] two days of weather" in lines


def test_cli_export_to_a_file(t, db, tmp_path):
    sid, _ = tool_turn(t)
    out = tmp_path / "export.jsonl"
    assert ok(db, "export", sid, "--format", "jsonl", "-o", str(out)).stdout == ""
    assert json.loads(out.read_text()) == roundtrip(t.export(sid))


def test_cli_export_refuses_an_unknown_format_and_session(t, db):
    tool_turn(t)
    assert run(db, "export", SLACK_KEY, "--format", "csv").exit_code == 2
    missing = run(db, "export", "20990101_000000_deadbeef")
    assert missing.exit_code == 1 and "Traceback" not in missing.output


# -- fork ----------------------------------------------------------------------------------------------

def lived_three_turns(t: Turnlog) -> tuple[str, list[int]]:
    """Alice's DM: three turns (6 messages); returns the session and its message positions."""
    for n in range(1, 4):
        t._clock.set(f"2026-03-01T10:0{n}:00+00:00")
        sid = t.handle_message(alice(f"m{n}", user_name="alice"), f"hello {n}", echo, lambda text: None)[0].session_id
    positions = [h.position for h in t.history(sid, types=["MessageAppended"])]
    assert len(positions) == 6
    return sid, positions


def same_messages(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(m["seq"], m["role"], m["content"], m["tool_calls"], m["tool_call_id"], m["name"], m["token_count"],
             m["finish_reason"], m["platform_message_id"]) for m in messages]


def test_a_fork_holds_the_transcript_up_to_the_moment_and_not_after(t):
    sid, positions = lived_three_turns(t)
    t._clock.set("2026-03-01T10:10:00+00:00")
    fork = t.fork(sid, f"#{positions[3]}")  # the 2nd turn's reply
    original = t.transcript(sid)
    assert same_messages(t.transcript(fork)) == same_messages(original[:4])
    assert [m["content"] for m in t.transcript(fork)] == ["hello 1", "re: hello 1", "hello 2", "re: hello 2"]
    assert same_messages(t.transcript(sid)) == same_messages(original)  # the original is untouched
    between = t.fork(sid, f"#{positions[3] + 1}")  # an event after that reply that is no message
    assert len(t.transcript(between)) == 4
    assert len(t.transcript(t.fork(sid, f"#{positions[4]}"))) == 5


def test_a_fork_at_an_iso_time_takes_what_was_said_by_then(t):
    sid, _ = lived_three_turns(t)
    fork = t.fork(sid, "2026-03-01T10:02:30+00:00")
    assert [m["content"] for m in t.transcript(fork)] == ["hello 1", "re: hello 1", "hello 2", "re: hello 2"]


def test_a_fork_is_a_new_session_with_the_original_as_parent(t):
    sid, positions = lived_three_turns(t)
    fork = t.fork(sid, f"#{positions[1]}")
    assert fork != sid
    row = t.session(fork)
    assert (row.parent_session_id, row.created_reason, row.session_key) == (sid, "fork", KEY)
    assert (row.ended_at, row.routed) == (None, False)
    assert t.routes()[0].session_id == sid  # without --to-key the key stays where it was
    assert t.export(fork)["parent_session_id"] == sid


def test_the_forks_lineage_is_recorded_as_events_in_its_history(t):
    sid, positions = lived_three_turns(t)
    fork = t.fork(sid, f"#{positions[3]}", actor="ops:carol")
    cause = f"fork:{sid}@#{positions[3]}"
    history = t.history(fork)
    created = history[0]
    assert (created.event, created.data["reason"], created.data["parent_session_id"]) == (
        "SessionCreated", "fork", sid)
    assert (created.actor, created.cause) == ("ops:carol", cause)
    assert created.summary == f"session {fork} created (fork), parent {sid}"
    copied = [h for h in history if h.event == "MessageAppended"]
    assert len(copied) == 4 and {(h.actor, h.cause) for h in copied} == {("ops:carol", cause)}
    assert all(h.cause == cause for h in history)
    assert not [h for h in t.history(sid) if h.position > positions[-1] and h.cause == cause]


def test_a_turn_on_the_fork_continues_its_sequence_numbers(t):
    sid, positions = lived_three_turns(t)
    fork = t.fork(sid, f"#{positions[3]}")
    token = t.turns.acquire_lease(fork, KEY)
    assert token.epoch == 1
    record = t.turns.append_message(token, "user", "a different third question")
    assert record.seq == 5
    t.turns.release_lease(token)
    assert [(m["seq"], m["content"]) for m in t.transcript(fork)][3:] == [
        (4, "re: hello 2"), (5, "a different third question")]
    assert len(t.transcript(sid)) == 6


def test_to_key_points_the_key_at_the_fork_and_the_next_message_lands_in_it(t):
    sid, positions = lived_three_turns(t)
    t._clock.set("2026-03-01T10:10:00+00:00")
    fork = t.fork(sid, f"#{positions[1]}", to_key=KEY)
    assert [(r.session_key, r.session_id, r.bound_reason) for r in t.routes()] == [(KEY, fork, "fork")]
    original = t.session(sid)
    assert (original.end_reason, original.routed) == ("session_switch", False)
    t._clock.set("2026-03-01T10:11:00+00:00")
    [outcome] = t.handle_message(alice("m9", user_name="alice"), "take two", echo, lambda text: None)
    assert (outcome.session_id, outcome.user_seq, outcome.reply_seq, outcome.created_session) == (fork, 3, 4, False)
    assert [m["content"] for m in t.transcript(fork)] == ["hello 1", "re: hello 1", "take two", "re: take two"]
    rebound = [h for h in t.history(KEY, types=["RouteBound"]) if h.session_id == fork]
    assert len(rebound) == 1 and rebound[0].cause == f"fork:{sid}@#{positions[1]}"


def test_fork_refuses_an_unknown_session_or_key(t):
    sid, positions = lived_three_turns(t)
    with pytest.raises(NotFound):
        t.fork("20990101_000000_deadbeef", f"#{positions[0]}")
    with pytest.raises(NotFound):
        t.fork(sid, f"#{positions[0]}", to_key="agent:main:telegram:dm:nobody")


def test_cli_fork_with_to_key(t, db):
    sid, positions = lived_three_turns(t)
    out = json.loads(ok(db, "fork", sid, "--at", f"#{positions[3]}", "--to-key", KEY, "--json").stdout)
    fork = out["session_id"]
    assert out == {"session_id": fork, "parent_session_id": sid, "messages": 4}
    assert t.routes()[0].session_id == fork
    created = json.loads(ok(db, "history", fork, "--type", "SessionCreated", "--json").stdout)
    assert [(r["data"]["reason"], r["data"]["parent_session_id"], r["actor"]) for r in created] == [
        ("fork", sid, "cli")]
    text = ok(db, "fork", sid, "--at", f"#{positions[1]}").output
    assert text.startswith(f"forked {sid} at #{positions[1]} -> ") and text.rstrip().endswith("(2 messages)")
    missing = run(db, "fork", "20990101_000000_deadbeef", "--at", "#1")
    assert missing.exit_code == 1 and "Traceback" not in missing.output
