"""The audit timeline (`history`) at the public surface: filters by position, time and event type;
who did each thing (actor), why (cause) and what it was (a one-line summary); table or JSON.

One scenario for the module (ManualClock, SequentialIds), alice's Telegram DM:
  10:01 turn 1 and 10:02 turn 2 on S1; 10:03 an operator (ops:bob, ticket:7) suspends S1;
  10:04 turn 3 lands on a new S2 (reason suspended); 10:05 /new ends S2; 10:06 turn 4 on S3
  (its message is two lines long). Bob's DM has one turn at 10:01:30 on a session of its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from turnlog import InvalidRequest, ManualClock, NotFound, SequentialIds, SessionSource, Turnlog
from turnlog.cli import main as cli

from chat import alice, echo

KEY = "agent:main:telegram:dm:42"
BOB_KEY = "agent:main:telegram:dm:77"
LONG = "hello 4\nsecond line of a message long enough to be cut short in a one-line summary"


@dataclass
class Lived:
    db: Path
    t: Turnlog
    s1: str
    s2: str
    s3: str
    bob: str

    def history(self, *args, **kwargs):
        return self.t.history(*args, **kwargs)


@pytest.fixture(scope="module")
def lived(tmp_path_factory) -> Lived:
    db = tmp_path_factory.mktemp("audit") / "gateway.db"
    clock = ManualClock("2026-03-01T10:00:00+00:00")
    t = Turnlog(db, clock=clock, session_ids=SequentialIds(), owner="gw-1")
    clock.set("2026-03-01T10:01:00+00:00")
    s1 = t.handle_message(alice("m1", user_name="alice"), "hello 1", echo, lambda text: None)[0].session_id
    clock.set("2026-03-01T10:01:30+00:00")
    bob = SessionSource(platform="telegram", chat_type="dm", chat_id="77", user_id="77", message_id="b1")
    bob_sid = t.handle_message(bob, "hi from bob", echo, lambda text: None)[0].session_id
    clock.set("2026-03-01T10:02:00+00:00")
    t.handle_message(alice("m2", user_name="alice"), "hello 2", echo, lambda text: None)
    clock.set("2026-03-01T10:03:00+00:00")
    assert t.suspend(KEY, "abuse", actor="ops:bob", cause="ticket:7")
    clock.set("2026-03-01T10:04:00+00:00")
    s2 = t.handle_message(alice("m3", user_name="alice"), "hello 3", echo, lambda text: None)[0].session_id
    clock.set("2026-03-01T10:05:00+00:00")
    assert t.command(alice("m3b", user_name="alice"), "/new").changed
    clock.set("2026-03-01T10:06:00+00:00")
    s3 = t.handle_message(alice("m4", user_name="alice"), LONG, echo, lambda text: None)[0].session_id
    assert len({s1, s2, s3, bob_sid}) == 4
    yield Lived(db, t, s1, s2, s3, bob_sid)
    t.close()


def one(entries, event, **data):
    found = [e for e in entries if e.event == event and all(e.data.get(k) == v for k, v in data.items())]
    assert len(found) == 1, (event, data, [(e.position, e.event) for e in entries])
    return found[0]


# -- what each row says ------------------------------------------------------------------------------

def test_every_row_has_a_time_an_actor_a_cause_and_a_one_line_summary(lived):
    entries = lived.history(KEY)
    assert len(entries) > 50
    for e in entries:
        assert e.at.startswith("2026-03-01T10:0"), e
        assert e.actor and e.cause, e
        assert e.summary and "\n" not in e.summary and len(e.summary) <= 120, e
        assert e.summary != e.event, f"{e.event} has no summary in words"


def test_rows_are_in_log_order_and_name_their_session(lived):
    entries = lived.history(KEY)
    positions = [e.position for e in entries]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    sessions = {e.session_id for e in entries if e.session_id}
    assert sessions == {lived.s1, lived.s2, lived.s3}


def test_the_operator_the_policy_and_the_user_are_named_as_actors_with_their_causes(lived):
    entries = lived.history(KEY)
    suspended = one(entries, "SessionSuspended")
    assert (suspended.actor, suspended.cause, suspended.session_id, suspended.summary) == (
        "ops:bob", "ticket:7", lived.s1, "suspended (abuse)")
    by_policy = one(entries, "SessionEnded", reason="suspended")
    assert (by_policy.actor, by_policy.cause, by_policy.session_id) == ("system:policy", "message:m3", lived.s1)
    by_user = one(entries, "SessionEnded", reason="session_reset")
    assert (by_user.actor, by_user.cause, by_user.session_id, by_user.summary) == (
        "telegram:user:42", "command:/new:m3b", lived.s2, "session ended (session_reset)")
    rebound = one(entries, "RouteBound", session_id=lived.s2)
    assert rebound.summary == f"route -> {lived.s2} (suspended), was {lived.s1}"


def test_a_turn_reads_as_lease_messages_and_delivery_in_words(lived):
    turn = [e for e in lived.history(KEY) if e.cause == "inbound:1"]
    summaries = [e.summary for e in turn]
    assert "lease epoch 1 acquired by gw-1" in summaries
    assert "user: hello 1" in summaries and "assistant: re: hello 1" in summaries
    assert "reply #2 owed to telegram:42, delivery attempt 1 by gw-1" in summaries  # recorded already attempting
    assert "delivered (attempt 1)" in summaries
    assert "lease epoch 1 released (completed)" in summaries


def test_a_long_multiline_message_is_summarised_on_one_cut_line(lived):
    user = one(lived.history(lived.s3, types=["MessageAppended"]), "MessageAppended", role="user")
    assert user.summary.startswith("user: hello 4 second line")
    assert user.summary.endswith("…") and len(user.summary) < len("user: " + LONG)


# -- which rows ------------------------------------------------------------------------------------

def test_a_key_shows_all_its_sessions_and_a_session_only_its_own(lived):
    of_s1 = lived.history(lived.s1)
    assert {e.session_id for e in of_s1} == {lived.s1}
    assert [e.event for e in of_s1][:1] == ["SessionCreated"]
    assert set(e.position for e in of_s1) <= set(e.position for e in lived.history(KEY))
    assert {e.session_id for e in lived.history(BOB_KEY) if e.session_id} == {lived.bob}
    assert not {e.position for e in lived.history(BOB_KEY)} & {e.position for e in lived.history(KEY)}


def test_since_and_until_by_position_are_inclusive(lived):
    suspended = one(lived.history(KEY), "SessionSuspended").position
    rebound = one(lived.history(KEY), "RouteBound", session_id=lived.s2).position
    window = lived.history(KEY, since=f"#{suspended}", until=f"#{rebound}")
    assert [e.event for e in window] == ["SessionSuspended", "SessionEnded", "SessionCreated", "RouteBound"]
    assert (window[0].position, window[-1].position) == (suspended, rebound)
    assert [e.position for e in lived.history(KEY, since=suspended, until=suspended)] == [suspended]
    everything = lived.history(KEY)
    assert [e.position for e in lived.history(KEY, since=f"#{suspended}")] == [
        e.position for e in everything if e.position >= suspended]
    assert [e.position for e in lived.history(KEY, until=f"#{suspended}")] == [
        e.position for e in everything if e.position <= suspended]


def test_since_and_until_by_iso_time_are_inclusive(lived):
    window = lived.history(KEY, since="2026-03-01T10:03:00+00:00", until="2026-03-01T10:04:00+00:00")
    assert {e.at for e in window} == {"2026-03-01T10:03:00+00:00", "2026-03-01T10:04:00+00:00"}
    assert window[0].event == "SessionSuspended"
    assert [e for e in lived.history(KEY) if "10:03:00" <= e.at[11:19] <= "10:04:00"] == window
    between = lived.history(KEY, since="2026-03-01T10:03:30+00:00", until="2026-03-01T10:04:30+00:00")
    assert {e.at for e in between} == {"2026-03-01T10:04:00+00:00"}


def test_an_iso_time_in_another_zone_filters_the_same_rows(lived):
    utc = lived.history(KEY, since="2026-03-01T10:03:00+00:00", until="2026-03-01T10:04:00+00:00")
    paris = lived.history(KEY, since="2026-03-01T11:03:00+01:00", until="2026-03-01T11:04:00+01:00")
    zulu = lived.history(KEY, since="2026-03-01T10:03:00Z", until="2026-03-01T10:04:00Z")
    assert [e.position for e in paris] == [e.position for e in zulu] == [e.position for e in utc]
    assert utc


def test_position_and_time_bounds_combine(lived):
    first_of_s3 = one(lived.history(KEY), "SessionCreated", session_id=lived.s3).position
    rows = lived.history(KEY, since=f"#{first_of_s3}", until="2026-03-01T10:06:00+00:00")
    assert rows[0].position == first_of_s3 and rows[-1].position == lived.history(KEY)[-1].position
    assert lived.history(KEY, since="2026-03-01T10:07:00+00:00") == []
    assert lived.history(KEY, until="2026-03-01T09:00:00+00:00") == []


def test_type_filters_keep_only_the_named_events(lived):
    ended = lived.history(KEY, types=["SessionEnded"])
    assert [(e.session_id, e.data["reason"]) for e in ended] == [(lived.s1, "suspended"), (lived.s2, "session_reset")]
    routing = lived.history(KEY, types=["RouteRegistered", "RouteBound", "RouteDetached"])
    assert [(e.event, e.session_id) for e in routing] == [  # the route was registered already bound to s1
        ("RouteRegistered", lived.s1), ("RouteBound", lived.s2), ("RouteDetached", lived.s2), ("RouteBound", lived.s3)]
    with pytest.raises(InvalidRequest, match="no event is named 'NoSuchEvent'"):  # a typo is not "none happened"
        lived.history(KEY, types=["NoSuchEvent"])
    windowed = lived.history(KEY, types=["MessageAppended"], since="2026-03-01T10:04:00+00:00",
                             until="2026-03-01T10:04:00+00:00")
    assert [e.summary for e in windowed] == ["user: hello 3", "assistant: re: hello 3"]


def test_bad_bounds_and_unknown_keys_are_refused(lived):
    for bad in ("#x", "soon", "2026-03-01T10:03:00"):
        with pytest.raises(InvalidRequest):
            lived.history(KEY, since=bad)
    with pytest.raises(InvalidRequest):
        lived.history(KEY, until="#999999")
    with pytest.raises(NotFound):
        lived.history("agent:main:telegram:dm:nobody")


# -- the CLI ----------------------------------------------------------------------------------------

def run(lived: Lived, *args: str):
    return CliRunner().invoke(cli, ["--db", str(lived.db), *args], env={"TURNLOG_DB": None, "TURNLOG_DEBUG": None})


def ok(lived: Lived, *args: str):
    result = run(lived, *args)
    assert result.exit_code == 0, result.output
    return result


def test_cli_history_is_a_readable_aligned_table_by_default(lived):
    entries = lived.history(KEY)
    lines = ok(lived, "history", KEY).output.splitlines()
    header = lines[0]
    assert header.split() == ["position", "at", "event", "actor", "cause", "session_id", "summary"]
    assert len(lines) == 1 + len(entries)
    column = header.index("summary")
    for line, e in zip(lines[1:], entries):
        assert line.split()[:5] == [str(e.position), e.at, e.event, e.actor, e.cause]
        assert line[column:] == e.summary  # every summary starts under its header
    assert not any(line.lstrip().startswith("{") for line in lines)


def test_cli_history_json_is_the_api_rows(lived):
    out = json.loads(ok(lived, "history", lived.s1, "--json").stdout)
    assert out == [json.loads(json.dumps(e.to_dict())) for e in lived.history(lived.s1)]
    assert all({"position", "at", "event", "actor", "cause", "summary", "data"} <= set(row) for row in out)


def test_cli_history_filters(lived):
    suspended = one(lived.history(KEY), "SessionSuspended").position
    out = json.loads(ok(lived, "history", KEY, "--since", f"#{suspended}", "--until", "2026-03-01T10:04:00+00:00",
                        "--type", "SessionEnded", "--type", "SessionCreated", "--json").stdout)
    assert [(r["event"], r["session_id"]) for r in out] == [("SessionEnded", lived.s1), ("SessionCreated", lived.s2)]
    table = ok(lived, "history", KEY, "--type", "SessionSuspended").output.splitlines()
    assert len(table) == 2 and table[1].endswith("suspended (abuse)")


def test_cli_history_refuses_a_bad_moment_in_one_line(lived):
    result = run(lived, "history", KEY, "--since", "last tuesday")
    assert result.exit_code == 2 and "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and "last tuesday" in errors[0]
    missing = run(lived, "history", "agent:main:telegram:dm:nobody")
    assert missing.exit_code == 1 and "nobody" in missing.output and "Traceback" not in missing.output
