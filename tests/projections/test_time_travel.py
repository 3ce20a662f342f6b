"""Time travel at the public surface: the gateway as of any moment (`at`), and what changed (`diff`).

One scenario is lived once for the module, with a real crash in it:
  gateway gw-1 (ManualClock, SequentialIds): alice's Telegram DM gets 3 turns on S1 (10:01, 10:02,
  10:03), /new at 10:04, 2 turns on S2 (10:05, 10:06), clean stop;
  a child process (gateway gw-child, 10:08) starts a 6th turn on S2 and is SIGKILLed while its agent
  holds the turn lease (the user message is persisted, no reply);
  gateway gw-2 boots in a new Turnlog at 10:10, recovers (lease revoked, S2 resume_pending), sweeps
  the ledger (nothing owed) and resumes the turn once at 10:10:01, then stops cleanly.
Moments are named by positions read from `history()` and by ISO times; each test asks what the
routing map, the sessions' flags, the lease holders and the delivery ledger were then.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness import procs
from turnlog import InvalidRequest, ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.cli import main as cli

from chat import alice, collect, echo

KEY = "agent:main:telegram:dm:42"
BEFORE_NEW = "2026-03-01T10:03:30+00:00"  # after the 3rd turn on S1, before /new
DETACHED = "2026-03-01T10:04:30+00:00"  # after /new, before the next message
AFTER_ALL = "2026-03-01T11:00:00+00:00"  # after the recovery's clean stop
CUT_OFF = "this turn is cut off"


def resumed(history, item) -> str:
    return f"resumed after a {history[-1].role} note"


CHILD = """
from turnlog import SequentialIds, SessionSource
t = kit.turnlog(session_ids=SequentialIds(), owner="gw-child")
t.start_gateway("main")
src = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", user_name="alice",
                    message_id="m6")

def think(history, item):
    holder = t.turns.holder(history[-1].session_id)
    kit.ready(session_id=history[-1].session_id,
              holder={**holder.to_dict(), "expires_at": holder.expires_at.isoformat()})
    kit.hang()

t.handle_message(src, "this turn is cut off", think, print)
"""


@dataclass
class Scenario:
    db: Path
    t: Turnlog
    s1: str
    s2: str
    child: dict[str, Any]
    boot: Any
    resumed: list[Any]
    sent: list[str]

    def position(self, event: str, **match: Any) -> int:
        """The one position of `event` in the key's history whose data (or cause prefix) matches."""
        found = []
        for h in self.t.history(KEY, types=[event]):
            cause = match.get("cause")
            if cause is not None and not (h.cause or "").startswith(cause):
                continue
            if all(h.data.get(k) == v for k, v in match.items() if k != "cause"):
                found.append(h.position)
        assert len(found) == 1, (event, match, found)
        return found[0]


@pytest.fixture(scope="module")
def sc(tmp_path_factory) -> Scenario:
    tmp = tmp_path_factory.mktemp("time-travel")
    db = tmp / "gateway.db"
    sent: list[str] = []
    clock = ManualClock("2026-03-01T10:00:00+00:00")
    with Turnlog(db, clock=clock, session_ids=SequentialIds(), owner="gw-1") as t:
        t.start_gateway("main")
        outcomes = []
        for n, minute in enumerate((1, 2, 3), start=1):
            clock.set(f"2026-03-01T10:0{minute}:00+00:00")
            outcomes += t.handle_message(alice(f"m{n}", user_name="alice"), f"hello {n}", echo, sent.append)
        clock.set("2026-03-01T10:04:00+00:00")
        assert t.command(alice("m3", user_name="alice"), "/new").changed
        for n, minute in ((4, 5), (5, 6)):
            clock.set(f"2026-03-01T10:0{minute}:00+00:00")
            outcomes += t.handle_message(alice(f"m{n}", user_name="alice"), f"hello {n}", echo, sent.append)
        clock.set("2026-03-01T10:07:00+00:00")
        t.stop_gateway()
    s1, s2 = outcomes[0].session_id, outcomes[3].session_id
    assert [o.session_id for o in outcomes] == [s1, s1, s1, s2, s2] and s1 != s2

    # gw-child starts a 6th turn and is SIGKILLed while its agent holds the turn lease
    child = procs.crash(db, CHILD, at="2026-03-01T10:08:00+00:00", work=tmp).data
    assert child["session_id"] == s2 and child["holder"]["owner"] == "gw-child"

    clock = ManualClock("2026-03-01T10:10:00+00:00")
    t = Turnlog(db, clock=clock, session_ids=SequentialIds(), owner="gw-2")
    boot = t.start_gateway("main")
    assert t.sweep_deliveries(collect(sent)).delivered == []
    clock.advance(1)
    outcomes = t.resume_interrupted(resumed, sent.append)
    clock.advance(1)
    t.stop_gateway()
    yield Scenario(db, t, s1, s2, child, boot, outcomes, sent)
    t.close()


# -- the scenario happened as described ----------------------------------------------------------

def test_the_crash_was_recovered_and_the_turn_resumed_once(sc):
    assert sc.boot.previous_boot_id == "gw-child" and sc.boot.previous_clean is False
    assert [(i.session_id, i.action) for i in sc.boot.recovery.interrupted] == [(sc.s2, "resume_pending")]
    assert [(o.session_id, o.epoch, o.delivery_state) for o in sc.resumed] == [(sc.s2, 4, "delivered")]
    assert sc.sent == [f"re: hello {n}" for n in range(1, 6)] + ["resumed after a system note"]


# -- the gateway at chosen moments ---------------------------------------------------------------

def moments(sc: Scenario) -> dict[str, str]:
    """Each moment as `at` takes it: positions from history(), and ISO times."""
    return {
        "before /new (ISO)": BEFORE_NEW,
        "SessionEnded of /new": f"#{sc.position('SessionEnded', cause='command:/new')}",
        "gw-child's LeaseAcquired": f"#{sc.position('LeaseAcquired', owner='gw-child')}",
        "recovery's ResumePendingMarked": f"#{sc.position('ResumePendingMarked', reason='restart_interrupted')}",
        "gw-2's LeaseAcquired (the resume)": f"#{sc.position('LeaseAcquired', owner='gw-2')}",
        "after everything (ISO)": AFTER_ALL,
    }


def state(sc: Scenario, when: str) -> dict[str, Any]:
    moment = sc.t.at(when)
    return {
        "routes": [(r["session_key"], r["session_id"], r["bound_reason"]) for r in moment.routes()],
        "sessions": {s["session_id"]: (s["ended"], s["end_reason"], s["resume_pending"], s["resume_reason"],
                                       s["suspended"]) for s in moment.sessions()},
        "leases": {x["session_id"]: (x["epoch"], x["owner"]) for x in moment.leases()},
        "ledger": [(d["session_id"], d["seq"], d["state"], d["attempts"], d["owner"]) for d in moment.ledger()],
    }


def expected(sc: Scenario, name: str) -> dict[str, Any]:
    s1, s2 = sc.s1, sc.s2
    s1_open = (False, None, False, None, False)
    s1_reset = (True, "session_reset", False, None, False)
    s2_open = (False, None, False, None, False)
    s2_pending = (False, None, True, "restart_interrupted", False)
    s1_ledger = [(s1, seq, "delivered", 1, "gw-1") for seq in (2, 4, 6)]
    s2_ledger = [(s2, seq, "delivered", 1, "gw-1") for seq in (2, 4)]
    on_s1 = [(KEY, s1, "first_message")]
    on_s2 = [(KEY, s2, "route_detached")]
    return {
        "before /new (ISO)": {"routes": on_s1, "sessions": {s1: s1_open}, "leases": {s1: (3, None)},
                              "ledger": s1_ledger},
        # the route is detached by the event after this one: S1 has ended but is still routed
        "SessionEnded of /new": {"routes": on_s1, "sessions": {s1: s1_reset}, "leases": {s1: (3, None)},
                                 "ledger": s1_ledger},
        "gw-child's LeaseAcquired": {"routes": on_s2, "sessions": {s1: s1_reset, s2: s2_open},
                                     "leases": {s1: (3, None), s2: (3, "gw-child")},
                                     "ledger": s1_ledger + s2_ledger},
        "recovery's ResumePendingMarked": {"routes": on_s2, "sessions": {s1: s1_reset, s2: s2_pending},
                                           "leases": {s1: (3, None), s2: (3, None)},
                                           "ledger": s1_ledger + s2_ledger},
        "gw-2's LeaseAcquired (the resume)": {"routes": on_s2, "sessions": {s1: s1_reset, s2: s2_pending},
                                              "leases": {s1: (3, None), s2: (4, "gw-2")},
                                              "ledger": s1_ledger + s2_ledger},
        "after everything (ISO)": {"routes": on_s2, "sessions": {s1: s1_reset, s2: s2_open},
                                   "leases": {s1: (3, None), s2: (4, None)},
                                   "ledger": s1_ledger + s2_ledger + [(s2, 7, "delivered", 1, "gw-2")]},
    }[name]


MOMENTS = ["before /new (ISO)", "SessionEnded of /new", "gw-child's LeaseAcquired",
           "recovery's ResumePendingMarked", "gw-2's LeaseAcquired (the resume)", "after everything (ISO)"]


@pytest.mark.parametrize("name", MOMENTS)
def test_at_gives_the_routing_map_flags_lease_holder_and_ledger_of_the_moment(sc, name):
    assert state(sc, moments(sc)[name]) == expected(sc, name)


def test_the_moments_are_in_log_order_and_iso_times_resolve_to_the_last_event_before_them(sc):
    positions = [sc.t.at(moments(sc)[name]).position for name in MOMENTS]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    head = sc.t.history(KEY)[-1].position
    before_new = [h.position for h in sc.t.history(KEY, until=BEFORE_NEW)][-1]
    assert positions[0] == before_new  # the 3rd turn's InboundCompleted
    assert sc.t.history(KEY, types=["InboundCompleted"])[2].position == before_new
    assert positions[-1] >= head  # gateway events (not the key's) may follow


def test_the_lease_holder_at_the_kill_is_the_child_with_its_turn(sc):
    moment = sc.t.at(moments(sc)["gw-child's LeaseAcquired"])
    lease = moment.lease(sc.s2)
    assert (lease["owner"], lease["epoch"], lease["owner_key"]) == ("gw-child", 3, KEY)
    assert lease["turn_id"] == sc.child["holder"]["turn_id"]
    assert lease["expires_at"] == sc.child["holder"]["expires_at"]


def test_between_new_and_the_next_message_the_key_points_at_no_session(sc):
    moment = sc.t.at(DETACHED)
    assert [(r["session_key"], r["session_id"], r["bound_reason"]) for r in moment.routes()] == [
        (KEY, None, "session_reset")]
    assert [s["session_id"] for s in moment.sessions()] == [sc.s1]
    with pytest.raises(Exception, match="pointed at no session"):
        moment.view("transcript", key=KEY)


def test_transcripts_as_of_a_moment_stop_where_the_log_stopped(sc):
    m = moments(sc)
    on_kill = sc.t.at(m["gw-child's LeaseAcquired"]).transcript(sc.s2)
    marked = sc.t.at(m["recovery's ResumePendingMarked"]).transcript(sc.s2)
    final = sc.t.at(m["after everything (ISO)"]).transcript(sc.s2)
    assert [x["content"] for x in on_kill] == ["hello 4", "re: hello 4", "hello 5", "re: hello 5"]
    assert [x["content"] for x in marked] == ["hello 4", "re: hello 4", "hello 5", "re: hello 5", CUT_OFF]
    assert [x["role"] for x in final] == ["user", "assistant", "user", "assistant", "user", "system", "assistant"]
    assert final == sc.t.transcript(sc.s2)
    assert [x["content"] for x in sc.t.at(m["SessionEnded of /new"]).view("transcript", key=KEY)] == [
        "hello 1", "re: hello 1", "hello 2", "re: hello 2", "hello 3", "re: hello 3"]


def test_the_queue_as_of_each_moment_shows_the_cut_off_item_started_then_gone(sc):
    m = moments(sc)
    # the lease is taken in the transaction that accepts and starts the item (its first event);
    # the item's one inbox event, accepted with its start, follows it
    lease = m["gw-child's LeaseAcquired"]
    assert sc.t.at(lease).queue(KEY) == []
    started = sc.t.at(f"#{int(lease[1:]) + 1}").queue(KEY)
    assert [(q["text"], q["state"], q["session_id"]) for q in started] == [(CUT_OFF, "started", sc.s2)]
    at_recovery = sc.t.at(m["recovery's ResumePendingMarked"]).queue(KEY)
    assert [(q["text"], q["state"], q["session_id"]) for q in at_recovery] == [(CUT_OFF, "started", sc.s2)]
    assert sc.t.at(m["after everything (ISO)"]).queue(KEY) == []


def test_an_iso_time_in_another_zone_is_the_same_moment(sc):
    utc = sc.t.at(BEFORE_NEW).position
    assert sc.t.at("2026-03-01T12:03:30+02:00").position == utc
    assert sc.t.at("2026-03-01T05:03:30-05:00").position == utc
    assert sc.t.at("2026-03-01T10:03:30Z").position == utc


def test_at_refuses_moments_outside_the_log_or_without_a_zone(sc):
    head = sc.t.at(AFTER_ALL).position
    assert sc.t.at("2026-02-01T00:00:00+00:00").routes() == []  # before the first event: nothing yet
    for bad in (f"#{head + 1}", "#-1", "#x", "yesterday", "2026-03-01T10:03:30"):
        with pytest.raises(InvalidRequest):
            sc.t.at(bad)
    with pytest.raises(InvalidRequest, match="'yesterday': it is not an ISO time"):
        sc.t.at("yesterday")
    with pytest.raises(InvalidRequest, match="'2026-03-01T10:03:30': it has no time zone"):
        sc.t.at("2026-03-01T10:03:30")


# -- diff between two moments ------------------------------------------------------------------

def test_diff_from_before_new_to_the_end_lists_exactly_what_changed(sc):
    m = moments(sc)
    a, b = sc.t.at(m["before /new (ISO)"]).position, sc.t.at(m["after everything (ISO)"]).position
    end = sc.t.at(AFTER_ALL)
    assert sc.t.diff(BEFORE_NEW, AFTER_ALL) == {
        "from": a, "to": b, "events": b - a,
        "keys": {KEY: [{"change": "rebound", "from_session": sc.s1, "to_session": sc.s2,
                        "reason": "route_detached"}]},
        "sessions": {
            sc.s1: {"session": {"ended": {"from": False, "to": True},
                                "end_reason": {"from": None, "to": "session_reset"}}},
            sc.s2: {"session": {"from": None, "to": end.session(sc.s2)},
                    "lease": {"from": None, "to": end.lease(sc.s2)},
                    "messages_added": 7,
                    "deliveries": {2: {"from": None, "to": "delivered"}, 4: {"from": None, "to": "delivered"},
                                   7: {"from": None, "to": "delivered"}}},
        },
    }


def test_diff_across_the_crash_shows_the_lease_epochs_the_resume_and_its_delivery(sc):
    m = moments(sc)
    d = sc.t.diff(m["gw-child's LeaseAcquired"], m["after everything (ISO)"])
    assert d["keys"] == {}
    assert d["sessions"] == {sc.s2: {
        "lease": {"epoch": {"from": 3, "to": 4}, "owner": {"from": "gw-child", "to": None},
                  "turn_id": {"from": sc.child["holder"]["turn_id"], "to": None}},
        "messages_added": 3,  # the cut-off user message (saved after the lease), the note, the reply
        "deliveries": {7: {"from": None, "to": "delivered"}},
    }}


def test_diff_over_the_recovery_alone_shows_the_revoked_lease_and_the_resume_flag(sc):
    m = moments(sc)
    d = sc.t.diff(m["gw-child's LeaseAcquired"], m["recovery's ResumePendingMarked"])
    assert d["keys"] == {}
    assert d["sessions"] == {sc.s2: {
        "session": {"resume_pending": {"from": False, "to": True},
                    "resume_reason": {"from": None, "to": "restart_interrupted"}},
        "lease": {"owner": {"from": "gw-child", "to": None},
                  "turn_id": {"from": sc.child["holder"]["turn_id"], "to": None}},
        "messages_added": 1,  # the cut-off user message
    }}


def test_diff_is_the_same_either_way_round_and_empty_between_equal_moments(sc):
    m = moments(sc)
    a, b = m["SessionEnded of /new"], m["recovery's ResumePendingMarked"]
    assert sc.t.diff(a, b) == sc.t.diff(b, a)
    same = sc.t.diff(a, a)
    assert (same["events"], same["keys"], same["sessions"]) == (0, {}, {})


def test_diff_for_one_key_only_lists_that_key(sc):
    d = sc.t.diff(BEFORE_NEW, AFTER_ALL, key=KEY)
    assert list(d["keys"]) == [KEY] and set(d["sessions"]) == {sc.s1, sc.s2}
    other = sc.t.diff(BEFORE_NEW, AFTER_ALL, key="agent:main:telegram:dm:77")
    assert (other["keys"], other["sessions"]) == ({}, {})


# -- the same through the CLI ----------------------------------------------------------------------

def run(sc: Scenario, *args: str):
    result = CliRunner().invoke(cli, ["--db", str(sc.db), *args], env={"TURNLOG_DB": None, "TURNLOG_DEBUG": None})
    return result


def ok(sc: Scenario, *args: str):
    result = run(sc, *args)
    assert result.exit_code == 0, result.output
    return result


def test_cli_at_routes_json_is_the_routing_map_of_the_moment(sc):
    for name in ("SessionEnded of /new", "gw-child's LeaseAcquired"):
        when = moments(sc)[name]
        out = json.loads(ok(sc, "at", when, "routes", "--json").stdout)
        moment = sc.t.at(when)
        assert out == {"position": moment.position, "at": moment.at, "routes": moment.routes()}
    assert [r["session_id"] for r in out["routes"]] == [sc.s2]


def test_cli_at_leases_and_ledger_of_one_session(sc):
    when = moments(sc)["gw-child's LeaseAcquired"]
    leases = json.loads(ok(sc, "at", when, "leases", "--session", sc.s2, "--json").stdout)["leases"]
    assert [(x["session_id"], x["epoch"], x["owner"]) for x in leases] == [(sc.s2, 3, "gw-child")]
    ledger = json.loads(ok(sc, "at", AFTER_ALL, "ledger", "--key", KEY, "--json").stdout)["ledger"]
    assert [(d["session_id"], d["seq"], d["owner"]) for d in ledger] == [
        (sc.s1, 2, "gw-1"), (sc.s1, 4, "gw-1"), (sc.s1, 6, "gw-1"), (sc.s2, 2, "gw-1"), (sc.s2, 4, "gw-1"),
        (sc.s2, 7, "gw-2")]


def test_cli_at_prints_a_table_by_default(sc):
    when = moments(sc)["gw-child's LeaseAcquired"]
    position = sc.t.at(when).position
    lines = ok(sc, "at", when, "sessions").output.splitlines()
    assert lines[0] == f"as of #{position} (2026-03-01T10:08:00+00:00):"
    assert lines[1].split()[:2] == ["session_id", "session_key"]
    assert [line.split()[0] for line in lines[2:]] == [sc.s1, sc.s2]


def test_cli_diff_json_equals_the_api_diff(sc):
    m = moments(sc)
    a = sc.t.at(m["before /new (ISO)"]).position
    b = sc.t.at(m["recovery's ResumePendingMarked"]).position
    out = json.loads(ok(sc, "diff", f"#{a}", f"#{b}", "--json").stdout)
    assert out == json.loads(json.dumps(sc.t.diff(f"#{a}", f"#{b}")))
    assert out["keys"][KEY] == [{"change": "rebound", "from_session": sc.s1, "to_session": sc.s2,
                                 "reason": "route_detached"}]
    assert out["sessions"][sc.s2]["session"]["to"]["resume_pending"] is True
    assert out["sessions"][sc.s2]["deliveries"] == {"2": {"from": None, "to": "delivered"},
                                                    "4": {"from": None, "to": "delivered"}}


def test_cli_diff_prints_the_rebinding_in_words(sc):
    text = ok(sc, "diff", BEFORE_NEW, AFTER_ALL).output
    assert f"key {KEY}: rebound {sc.s1} -> {sc.s2} (route_detached)" in text
    assert f"session {sc.s1}:" in text and f"session {sc.s2}:" in text


def test_cli_at_refuses_a_position_past_the_log_in_one_line(sc):
    result = run(sc, "at", "#100000", "routes")
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert [line for line in result.output.splitlines() if line.startswith("Error")] == [
        f"Error: log position 100000 is outside the log (1..{sc.t.at(AFTER_ALL).position})"]
