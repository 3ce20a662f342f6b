"""Crash recovery at the public surface (docs/behaviour.md §6, §7; seed 002 §7), with real processes killed by SIGKILL.

A crash here is always a real child process (tests/harness/procs.py) killed with SIGKILL at a chosen
point: inside the agent (no reply persisted), inside the platform send (reply persisted and owed),
or right after a commit (between two transactions of the turn). The next boot is the test process
itself, or further children. Boots get ManualClock times minutes apart unless a test says otherwise,
so the boot-storm guard (3 boots within 60 s) only trips where a test wants it to.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import never_called, procs
from harness.log import event_count, events
from turnlog import EngineConfig, ManualClock, SessionSource, Turnlog
from turnlog.cli import main as cli

from chat import alice, reply_with

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
PREFIX = "♻️ Recovered reply"
GW = "main"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def boot(db: Path, minutes: float, **options) -> Turnlog:
    """A Turnlog for a boot at T0 + minutes (the test process playing the next gateway)."""
    return Turnlog(db, clock=ManualClock(at(minutes)), **options)


class Sent(list):
    """A sweep sender that records (target, text)."""

    def __call__(self, target, text):
        self.append((target, text))


def cli_run(db: Path, *args: str):
    return CliRunner().invoke(cli, ["--db", str(db), *args], env={"TURNLOG_DB": None, "TURNLOG_DEBUG": None})


# -- child gateways ------------------------------------------------------------------------------

HEAD = """
from turnlog import SessionSource
src = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", user_name="alice",
                    message_id=MESSAGE_ID)
t = kit.turnlog()
report = t.start_gateway("main")
"""


def child(body: str, message_id: str = "m1") -> str:
    return HEAD.replace("MESSAGE_ID", repr(message_id)) + body


# Killed inside the agent: the turn holds its lease, no reply is persisted.
def in_agent(message_id: str = "m1", text: str = "please look into the build") -> str:
    return child(f"""
def think(history, item):
    kit.ready(boot=t.owner, session_id=history[-1].session_id, recovery=report.recovery.to_dict())
    kit.hang()
t.handle_message(src, {text!r}, think, print)
""", message_id)


IN_AGENT = in_agent()

# Killed inside the platform send: the reply and its delivery attempt are committed.
IN_SENDER = child("""
def send(text):
    kit.ready(boot=t.owner, text=text)
    kit.hang()
t.handle_message(src, "what is the answer?", lambda history, item: "the answer is 42", send)
""")

# A resume that hangs in the agent (the interrupted turn is interrupted again).
RESUME_IN_AGENT = """
from turnlog import SessionSource
t = kit.turnlog()
report = t.start_gateway("main")
t.sweep_deliveries(lambda target, text: None)
def think(history, item):
    kit.ready(boot=t.owner, recovery=report.recovery.to_dict(), note=history[-1].content, role=history[-1].role)
    kit.hang()
t.resume_interrupted(think, print)
kit.ready(boot=t.owner, recovery=report.recovery.to_dict(), note=None)
kit.hang()
"""


# -- 1. gateway lifecycle ------------------------------------------------------------------------

def test_a_boot_is_recorded_with_its_boot_id_pid_host_and_time(db):
    t = boot(db, 0)
    report = t.start_gateway(GW)
    assert report.boot_id == t.owner
    assert report.previous_boot_id is None and report.previous_clean is None
    last = t.status(GW).last_boot
    assert (last.boot_id, last.pid, last.host) == (t.owner, os.getpid(), socket.gethostname())
    assert last.started_at == at(0).isoformat()
    assert last.state == "running" and last.ended_clean is None
    [started] = events(t, "GatewayStarted")
    assert (started.boot_id, started.pid, started.host, started.timestamp) == (t.owner, os.getpid(),
                                                                               socket.gethostname(), at(0))


def test_a_clean_stop_lets_the_next_start_skip_recovery(db):
    first = boot(db, 0)
    first.start_gateway(GW)
    first.handle_message(alice("m1", user_name="alice"), "hello", reply_with("hi"), lambda text: None)
    first.stop_gateway()
    assert first.status(GW).last_boot.ended_clean is True
    [stopped] = events(first, "GatewayStopped")
    assert (stopped.boot_id, stopped.clean, stopped.drain_timed_out) == (first.owner, True, False)

    second = boot(db, 5)
    report = second.start_gateway(GW)
    assert (report.previous_boot_id, report.previous_clean) == (first.owner, True)
    assert report.recovery.recovered_boots == [] and report.recovery.interrupted == []
    assert events(second, "GatewayRecovered") == []
    assert second.resume_interrupted(never_called, never_called) == []


def test_a_clean_stop_drops_an_orphan_marker_unresumed(db):
    first = boot(db, 0)
    first.start_gateway(GW)
    routed = first.get_or_create_session(alice(user_name="alice"))
    first.turns.acquire_lease(routed.session_id, routed.session_key)  # a turn the stop did not wait for
    first.stop_gateway()

    second = boot(db, 5)
    report = second.start_gateway(GW)
    assert report.previous_clean is True
    assert report.recovery.clean_boots_with_orphans == [first.owner]
    assert report.recovery.interrupted == []
    assert second.turns.holder(routed.session_id) is None
    [revoked] = events(second, "LeaseRevoked")
    assert revoked.reason == "orphan_after_clean_stop"
    assert second.session(routed.session_id).resume_pending is False
    assert second.resume_interrupted(never_called, never_called) == []


def test_an_unclean_stop_is_read_from_the_log_alone(db, tmp_path):
    killed = procs.crash(db, IN_AGENT, at=at(0))
    boot_id = killed.data["boot"]
    # Nothing but the database matters: remove every other file the child or anyone left behind.
    for path in tmp_path.iterdir():
        if path.is_file() and not path.name.startswith(Path(db).name):
            path.unlink()
    (tmp_path / ".clean_shutdown").write_text("a marker file from some other program means nothing")

    t = boot(db, 2)
    last = t.status(GW).last_boot
    assert (last.boot_id, last.pid, last.state, last.recovered) == (boot_id, killed.pid, "running",
                                                                                False)
    report = t.start_gateway(GW)
    assert (report.previous_boot_id, report.previous_clean) == (boot_id, False)
    assert report.recovery.recovered_boots == [boot_id]
    [turn] = report.recovery.interrupted
    assert (turn.session_id, turn.boot_id, turn.action) == (killed.data["session_id"], boot_id, "resume_pending")
    [recovered] = events(t, "GatewayRecovered")
    assert (recovered.boot_id, recovered.interrupted_turns, recovered.resume_pending) == (boot_id, 1, 1)


CRASH_LOOP = """
t = kit.turnlog()
def broken(*args, **kwargs):
    raise RuntimeError("a bad release: every boot dies during start-up")
for n in range(BOOTS):
    crashing = kit.turnlog()
    crashing._recovery.recover = broken
    try:
        crashing.start_gateway("main")
    except RuntimeError:
        pass
    crashing.close()
kit.ready()
kit.hang()
"""


def test_an_interrupted_turn_survives_a_long_crash_loop_of_later_boots(db):
    """Boots that die during start-up never recover anyone; the turn of the boot before them must
    still be recovered by the first boot that gets through, however many boots failed in between."""
    killed = procs.crash(db, IN_AGENT, at=at(0))
    procs.crash(db, CRASH_LOOP.replace("BOOTS", "25"), at=at(1))
    t = boot(db, 2)
    report = t.start_gateway(GW)
    assert killed.data["boot"] in report.recovery.recovered_boots
    assert len(report.recovery.recovered_boots) == 26
    [turn] = report.recovery.interrupted
    assert (turn.session_id, turn.boot_id, turn.action) == (killed.data["session_id"], killed.data["boot"],
                                                            "resume_pending")
    assert t.status(GW).active_turns == []
    assert report.boot_storm is True  # a crash loop: no auto-resume this boot, the session waits
    assert t.resume_interrupted(never_called, never_called) == []
    t.stop_gateway()
    later = boot(db, 10)
    later.start_gateway(GW)
    assert [o.session_id for o in later.resume_interrupted(reply_with("back"), lambda text: None)] == \
        [killed.data["session_id"]]


# -- 2a. reply persisted and in the ledger --------------------------------------------------------

def test_killed_inside_the_send_the_reply_is_redelivered_once_with_the_prefix(db):
    killed = procs.crash(db, IN_SENDER, at=at(0))
    assert killed.data["text"] == "the answer is 42"

    t = boot(db, 2)
    [row] = t.ledger()
    assert (row.state, row.attempts, row.owner) == ("attempting", 1, killed.data["boot"])
    report = t.start_gateway(GW)
    [turn] = report.recovery.interrupted
    assert turn.action == "redeliver"
    session_id = turn.session_id
    assert t.session(session_id).resume_pending is False

    sent = Sent()
    swept = t.sweep_deliveries(sent)
    assert len(swept.delivered) == 1
    [(target, text)] = sent
    assert (target["platform"], target["chat_id"]) == ("telegram", "42")
    assert text.startswith(PREFIX) and text.endswith("\n\nthe answer is 42")
    [row] = t.ledger()
    assert (row.state, row.attempts, row.recovered) == ("delivered", 2, True)

    assert t.sweep_deliveries(never_called).delivered == []
    assert t.resume_interrupted(never_called, never_called) == []
    assert [m["role"] for m in t.transcript(session_id)] == ["user", "assistant"]
    assert t.queue(alice(user_name="alice")) == []
    t.stop_gateway()

    later = boot(db, 10)
    assert later.start_gateway(GW).recovery.interrupted == []
    assert later.sweep_deliveries(never_called).delivered == []
    assert later.resume_interrupted(never_called, never_called) == []


# -- 2b. reply persisted but not in the ledger ---------------------------------------------------

LOW_LEVEL = child("""
routed = t.get_or_create_session(src)
token = t.turns.acquire_lease(routed.session_id, routed.session_key)
t.turns.append_message(token, "user", "summarise the thread")
t.turns.append_message(token, "assistant", REPLY)
kit.ready(boot=t.owner, session_id=routed.session_id)
kit.hang()
""")


def test_a_reply_persisted_outside_the_ledger_becomes_one_unowned_row(db):
    killed = procs.crash(db, LOW_LEVEL.replace("REPLY", repr("the thread says: ship it")), at=at(0))
    session_id = killed.data["session_id"]
    t = boot(db, 2)
    assert t.ledger() == []
    [turn] = t.start_gateway(GW).recovery.interrupted
    assert turn.action == "unowned_row"
    [row] = t.ledger()
    assert row.owner is None and row.state != "delivered"

    sent = Sent()
    assert len(t.sweep_deliveries(sent).delivered) == 1
    [(target, text)] = sent
    assert target["chat_id"] == "42"
    assert text.startswith(PREFIX) and text.endswith("\n\nthe thread says: ship it")
    assert t.sweep_deliveries(never_called).delivered == []
    assert t.resume_interrupted(never_called, never_called) == []
    assert [m["content"] for m in t.transcript(session_id)] == ["summarise the thread", "the thread says: ship it"]
    assert t.session(session_id).resume_pending is False


def test_a_bare_silence_marker_on_a_human_turn_becomes_the_silence_notice(db):
    procs.crash(db, LOW_LEVEL.replace("REPLY", repr("[SILENT]")), at=at(0))
    t = boot(db, 2)
    [turn] = t.start_gateway(GW).recovery.interrupted
    assert turn.action == "unowned_row"
    sent = Sent()
    t.sweep_deliveries(sent)
    [(_, text)] = sent
    assert text.startswith(PREFIX) and "returned only a silence marker" in text
    assert "[SILENT]" not in text


WAKEUP_SILENT = child("""
kit.kill_after_save(t, lambda items: any(getattr(i, "role", None) == "assistant" for i in items))
t.accept(src, "wake-up: anything new on the build?", kind="wakeup")
t.run_next(src, lambda history, item: "[SILENT]", print)
""")


def test_a_silent_wakeup_turn_cut_off_after_its_reply_owes_nothing(db):
    procs.crash(db, WAKEUP_SILENT, at=at(0))  # SIGKILLed right after committing the "[SILENT]" reply
    t = boot(db, 2)
    [turn] = t.start_gateway(GW).recovery.interrupted
    assert turn.action == "nothing_owed"
    assert t.ledger() == []
    assert t.sweep_deliveries(never_called).delivered == []
    assert t.resume_interrupted(never_called, never_called) == []
    assert t.queue(alice(user_name="alice")) == []
    assert [m["content"] for m in t.transcript(turn.session_id)] == ["wake-up: anything new on the build?",
                                                                     "[SILENT]"]


# -- 2c. no reply persisted -----------------------------------------------------------------------

def test_an_interrupted_turn_without_a_reply_is_resumed_exactly_once_with_a_system_note(db):
    killed = procs.crash(db, IN_AGENT, at=at(0))
    session_id = killed.data["session_id"]
    t = boot(db, 2)
    [turn] = t.start_gateway(GW).recovery.interrupted
    assert turn.action == "resume_pending"
    [pending] = t.status(GW).resume_pending
    assert (pending.session_id, pending.resume_reason) == (session_id, "restart_interrupted")
    assert [c.session_id for c in t.resume_candidates()] == [session_id]
    assert t.sweep_deliveries(never_called).delivered == []

    seen, sent = [], []

    def agent(history, item):
        seen.append(([(m.role, m.content) for m in history], item.text))
        return "picking up where I left off"

    [outcome] = t.resume_interrupted(agent, sent.append)
    assert outcome.session_id == session_id and outcome.delivery_state == "delivered"
    [(history, item_text)] = seen
    assert history[0] == ("user", "please look into the build")
    role, note = history[-1]
    assert role == "system" and "interrupted by a gateway interruption" in note
    assert item_text == "please look into the build"  # the interrupted message, not an empty turn
    assert sent == ["picking up where I left off"]
    assert t.session(session_id).resume_pending is False
    assert t.queue(alice(user_name="alice")) == []

    assert t.resume_interrupted(never_called, never_called) == []
    t.stop_gateway()
    later = boot(db, 10)
    later.start_gateway(GW)
    assert later.resume_interrupted(never_called, never_called) == []
    assert [m["role"] for m in later.transcript(session_id)] == ["user", "system", "assistant"]


def test_a_resume_racing_an_inbound_turn_does_not_answer_twice(db):
    """#45456: a human message answered while auto-resume runs through its list is not resumed again."""
    t = boot(db, 0)
    bob = SessionSource(platform="discord", chat_type="dm", chat_id="7", user_id="7", message_id="b1")
    first = t.get_or_create_session(alice(user_name="alice")).session_id
    second = t.get_or_create_session(bob).session_id
    t.mark_resume_pending(first, "restart_interrupted")
    t._clock.advance(1)
    t.mark_resume_pending(second, "restart_interrupted")
    t.start_gateway(GW)
    assert [c.session_id for c in t.resume_candidates()] == [first, second]
    other = boot(db, 0)  # another worker of the gateway, serving bob's chat meanwhile
    resumed = []

    def agent(history, item):
        resumed.append(history[-1].session_id)
        if history[-1].session_id == first:
            other.handle_message(bob, "are you there?", reply_with("yes, here"), lambda text: None)
        return "resumed"

    outcomes = t.resume_interrupted(agent, lambda text: None)
    assert resumed == [first]
    assert [o.session_id for o in outcomes] == [first]
    assert [m["role"] for m in t.transcript(second)] == ["user", "assistant"]


# -- 4. stuck loops -------------------------------------------------------------------------------

def test_three_interrupted_turns_in_a_row_suspend_the_session(db):
    first = procs.crash(db, IN_AGENT, at=at(0))
    session_id = first.data["session_id"]
    second = procs.crash(db, RESUME_IN_AGENT, at=at(2))  # recovers the first, resumes, is killed again
    assert [t["action"] for t in second.data["recovery"]["interrupted"]] == ["resume_pending"]
    assert second.data["role"] == "system"
    third = procs.crash(db, RESUME_IN_AGENT, at=at(4))
    assert [t["action"] for t in third.data["recovery"]["interrupted"]] == ["resume_pending"]

    t = boot(db, 6)
    [turn] = t.start_gateway(GW).recovery.interrupted
    assert (turn.session_id, turn.action) == (session_id, "suspended_stuck_loop")
    status = t.status(GW)
    assert [(s.session_id, s.suspend_reason) for s in status.suspended] == [(session_id, "stuck_loop")]
    assert t.resume_candidates() == []
    assert t.resume_interrupted(never_called, never_called) == []
    assert t.queue(alice(user_name="alice")) == []
    # The user gets a clean start: the next message opens a new session and is answered.
    [outcome] = t.handle_message(alice("m2", user_name="alice"), "hello again", reply_with("fresh start"), lambda text: None)
    assert outcome.session_id != session_id and outcome.reason == "suspended"


def test_suspension_closes_every_item_left_in_flight_on_the_session(db):
    """A human message may continue an interrupted session; if that turn is cut off too, both items
    were in flight, and the stuck-loop suspension must close both (not leave the first dangling)."""
    session_id = procs.crash(db, in_agent("m1", "first request"), at=at(0)).data["session_id"]
    second = procs.crash(db, in_agent("m2", "second request"), at=at(2))  # continues the session, cut off
    assert second.data["session_id"] == session_id
    assert [x["action"] for x in second.data["recovery"]["interrupted"]] == ["resume_pending"]
    assert len(Turnlog(db).queue(alice(user_name="alice"))) == 2
    procs.crash(db, RESUME_IN_AGENT, at=at(4))
    t = boot(db, 6)
    [turn] = t.start_gateway(GW).recovery.interrupted
    assert turn.action == "suspended_stuck_loop"
    assert t.queue(alice(user_name="alice")) == []
    closed = [e for e in events(t, "InboundCompleted")]
    assert sorted(e.outcome for e in closed) == ["stuck_loop", "stuck_loop"]


def test_a_completed_turn_in_between_resets_the_count(db):
    session_id = procs.crash(db, IN_AGENT, at=at(0)).data["session_id"]
    procs.crash(db, RESUME_IN_AGENT, at=at(2))
    t = boot(db, 4)
    [turn] = t.start_gateway(GW).recovery.interrupted
    assert turn.action == "resume_pending"  # two interrupted turns in a row so far
    [done] = t.resume_interrupted(reply_with("done at last"), lambda text: None)
    assert done.delivery_state == "delivered"
    t.stop_gateway()

    procs.crash(db, in_agent("m2", "and now the deploy"), at=at(6))
    fourth = procs.crash(db, RESUME_IN_AGENT, at=at(8))
    assert [x["action"] for x in fourth.data["recovery"]["interrupted"]] == ["resume_pending"]
    t = boot(db, 10)
    [turn] = t.start_gateway(GW).recovery.interrupted
    assert (turn.session_id, turn.action) == (session_id, "resume_pending")  # 4 interrupted, 2 in a row
    assert t.status(GW).suspended == []
    t.stop_gateway()

    procs.crash(db, RESUME_IN_AGENT, at=at(12))
    t = boot(db, 14)
    [turn] = t.start_gateway(GW).recovery.interrupted
    assert (turn.session_id, turn.action) == (session_id, "suspended_stuck_loop")


def test_the_count_is_derived_from_events_so_it_survives_restarts_and_rebuilds(db, tmp_path):
    """Hermes 0.19.0 deletes its counter file at every start, so its guard never fires (docs/behaviour.md §7.4)."""
    def lose_every_file_but_the_database():
        for path in tmp_path.iterdir():
            if path.is_file() and not path.name.startswith(Path(db).name):
                path.unlink()
        (tmp_path / ".restart_failure_counts").write_text("{}")
        (tmp_path / "restart_counts.json").write_text("{}")

    session_id = procs.crash(db, IN_AGENT, at=at(0)).data["session_id"]
    lose_every_file_but_the_database()
    procs.crash(db, RESUME_IN_AGENT, at=at(2))
    lose_every_file_but_the_database()
    assert cli_run(db, "rebuild", "--all").exit_code == 0
    # A clean boot in between that does not touch the session is a restart too, and changes nothing.
    quiet = boot(db, 3)
    assert [x.action for x in quiet.start_gateway(GW).recovery.interrupted] == ["resume_pending"]
    quiet.stop_gateway()
    quiet.close()
    procs.crash(db, RESUME_IN_AGENT, at=at(5))  # boots 3 min apart: the boot-storm guard stays open
    lose_every_file_but_the_database()
    assert cli_run(db, "rebuild", "--all").exit_code == 0

    t = boot(db, 8)
    [turn] = t.start_gateway(GW).recovery.interrupted
    assert (turn.session_id, turn.action) == (session_id, "suspended_stuck_loop")
    assert cli_run(db, "rebuild", "--all").exit_code == 0
    assert [s.session_id for s in t.status(GW).suspended] == [session_id]


# -- 5. auto-resume selection ---------------------------------------------------------------------

def _session(t: Turnlog, chat_id: str) -> str:
    return t.get_or_create_session(SessionSource(platform="telegram", chat_id=chat_id, user_id=chat_id)).session_id


@pytest.mark.parametrize("reason, phrase", [("restart_timeout", "a gateway restart"),
                                            ("shutdown_timeout", "a gateway shutdown"),
                                            ("restart_interrupted", "a gateway interruption")])
def test_each_restart_reason_is_auto_resumed_with_its_note(db, reason, phrase):
    t = boot(db, 0)
    session_id = _session(t, "1")
    t.mark_resume_pending(session_id, reason)
    t.start_gateway(GW)
    notes = []
    [outcome] = t.resume_interrupted(lambda h, i: notes.append(h[-1].content) or "back", lambda text: None)
    assert outcome.session_id == session_id
    assert f"interrupted by {phrase}" in notes[0]


def test_only_the_three_restart_reasons_are_auto_resumed(db):
    t = boot(db, 0)
    ids = {reason: _session(t, str(n)) for n, reason in enumerate(
        ["restart_timeout", "shutdown_timeout", "restart_interrupted", "operator", "compression_failed"])}
    for reason, session_id in ids.items():
        t.mark_resume_pending(session_id, reason)
        t._clock.advance(1)
    suspended = _session(t, "99")
    t.mark_resume_pending(suspended, "restart_timeout")
    t.suspend(suspended, "operator")
    t.start_gateway(GW)
    expected = [ids["restart_timeout"], ids["shutdown_timeout"], ids["restart_interrupted"]]
    assert [c.session_id for c in t.resume_candidates()] == expected
    outcomes = t.resume_interrupted(reply_with("back"), lambda text: None)
    assert [o.session_id for o in outcomes] == expected
    left = {r.session_id: r.resume_reason for r in t.status(GW).resume_pending}
    assert left == {ids["operator"]: "operator", ids["compression_failed"]: "compression_failed",
                    suspended: "restart_timeout"}


def test_a_marker_older_than_the_freshness_window_is_not_auto_resumed(db):
    t = boot(db, 0, config=EngineConfig(freshness_window_s=600))
    fresh, stale = _session(t, "1"), _session(t, "2")
    t.mark_resume_pending(stale, "restart_timeout")
    t._clock.advance(seconds=1)
    t.mark_resume_pending(fresh, "restart_timeout")
    t._clock.advance(seconds=600)  # stale: 601 s old; fresh: exactly 600 s old
    t.start_gateway(GW)
    assert [c.session_id for c in t.resume_candidates()] == [fresh]
    assert [o.session_id for o in t.resume_interrupted(reply_with("back"), lambda text: None)] == [fresh]
    assert [r.session_id for r in t.status(GW).resume_pending] == [stale]


def test_the_boot_storm_guard_skips_auto_resume_and_keeps_sessions_resume_pending(db):
    setup = boot(db, 0)
    session_id = _session(setup, "1")
    setup.mark_resume_pending(session_id, "restart_interrupted")
    tripped = []
    for seconds in (0, 10, 20, 30):  # docs/behaviour.md §7.3: tripped F, F, T, T
        t = Turnlog(db, clock=ManualClock(T0 + timedelta(seconds=seconds)))
        report = t.start_gateway(GW)
        tripped.append(report.boot_storm)
        assert bool(t.resume_candidates()) is not report.boot_storm
        if report.boot_storm:
            assert t.resume_interrupted(never_called, never_called) == []
        t.stop_gateway()
        t.close()
    assert tripped == [False, False, True, True]
    assert [r.session_id for r in setup.status(GW).resume_pending] == [session_id]

    t = Turnlog(db, clock=ManualClock(T0 + timedelta(seconds=200)))
    assert t.start_gateway(GW).boot_storm is False
    assert [o.session_id for o in t.resume_interrupted(reply_with("back"), lambda text: None)] == [session_id]


# -- 7. the CLI: status and recover ---------------------------------------------------------------

def test_status_shows_the_last_boot_how_it_ended_and_what_is_left(db):
    killed = procs.crash(db, IN_SENDER, at=at(0))
    result = cli_run(db, "status", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    last = data["last_boot"]
    assert (last["boot_id"], last["pid"], last["host"]) == (killed.data["boot"], killed.pid, socket.gethostname())
    assert (last["state"], last["ended_clean"], last["recovered"]) == ("running", None, False)
    # The killed boot's lease is the marker recovery reads, but no turn runs under it any more.
    assert data["active_turns"] == []
    [left] = data["expired_leases"]
    assert left["owner"] == killed.data["boot"]
    [owed] = data["pending_deliveries"]
    assert (owed["state"], owed["attempts"], owed["platform"]) == ("attempting", 1, "telegram")
    text = cli_run(db, "status").output
    assert "died without a stop" in text and "active turns: 0" in text and "expired leases: 1" in text
    assert "pending deliveries: 1" in text

    assert cli_run(db, "recover").exit_code == 0
    data = json.loads(cli_run(db, "status", "--json").stdout)
    assert data["last_boot"]["recovered"] is True
    assert data["last_boot"]["ended_clean"] is False
    assert data["active_turns"] == [] and data["expired_leases"] == []
    assert "ended UNCLEAN" in cli_run(db, "status").output

    t = boot(db, 5)
    t.start_gateway(GW)
    t.sweep_deliveries(lambda target, text: None)
    t.mark_resume_pending(alice(user_name="alice"), "restart_timeout")
    t.stop_gateway()
    data = json.loads(cli_run(db, "status", "--json").stdout)
    assert (data["last_boot"]["boot_id"], data["last_boot"]["ended_clean"]) == (t.owner, True)
    assert data["pending_deliveries"] == []
    assert [r["resume_reason"] for r in data["resume_pending"]] == ["restart_timeout"]
    text = cli_run(db, "status").output
    assert "ended clean" in text and "resume_pending: 1" in text and "suspended: 0" in text
    t.suspend(alice(user_name="alice"), "operator")
    data = json.loads(cli_run(db, "status", "--json").stdout)
    assert [r["suspend_reason"] for r in data["suspended"]] == ["operator"]


def test_recover_dry_run_changes_nothing(db):
    killed = procs.crash(db, IN_AGENT, at=at(0))
    with Turnlog(db) as t:
        before = event_count(t)
    result = cli_run(db, "recover", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dry_run"] is True and report["recovered_boots"] == [killed.data["boot"]]
    assert [x["action"] for x in report["interrupted"]] == ["resume_pending"]
    assert "would recover 1 unclean boot(s)" in cli_run(db, "recover", "--dry-run").output
    with Turnlog(db) as t:
        assert event_count(t) == before
        assert len(t.status(GW).expired_leases) == 1 and t.status(GW).resume_pending == []

    result = cli_run(db, "recover", "--json")
    assert json.loads(result.stdout)["recovered_boots"] == [killed.data["boot"]]
    with Turnlog(db) as t:
        assert event_count(t) > before
        assert t.status(GW).active_turns == [] and t.status(GW).expired_leases == []
        assert [r.resume_reason for r in t.status(GW).resume_pending] == ["restart_interrupted"]
    assert json.loads(cli_run(db, "recover", "--json").stdout)["recovered_boots"] == []


def test_recover_refuses_while_the_boot_is_alive_on_this_host(db, tmp_path):
    live = procs.start(db, child("""
kit.ready(boot=t.owner)
kit.hang()
"""), at=at(0))
    try:
        data = procs.wait_for(tmp_path / "ready.json", live)
        with Turnlog(db) as t:
            before = event_count(t)
        for args in (["recover"], ["recover", "--dry-run"], ["recover", "--json"]):
            result = cli_run(db, *args)
            assert result.exit_code == 1, result.output
            errors = [line for line in result.output.splitlines() if line.strip()]
            assert len(errors) == 1 and errors[0].startswith("Error:"), result.output
            assert "still running" in errors[0] and f"pid {data['pid']}" in errors[0]
            assert "Traceback" not in result.output
        with Turnlog(db) as t:
            assert event_count(t) == before
    finally:
        live.send_signal(signal.SIGKILL)
        live.wait()
    result = cli_run(db, "recover", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["recovered_boots"] == [data["boot"]]
