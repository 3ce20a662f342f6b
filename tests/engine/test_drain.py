"""Drain on stop / restart (docs/behaviour.md §7.1, seed 002 §7 "Drain 超时标记"): pre-marking, timeouts, the recorded stop.

A turn still running when the drain times out is marked resume_pending (restart_timeout, or
shutdown_timeout), the stop is recorded as "drain timed out", and the next start recovers it. The
gateway processes here are real children: the drain runs in the child while its agent is busy in
another thread, and the child then exits (or is SIGKILLed mid-drain) as a gateway process would.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from harness import never_called, procs
from harness.log import events
from turnlog import ManualClock, SessionSource, Turnlog

from chat import alice, collect, reply_with

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
PREFIX = "♻️ Recovered reply"
GW = "main"
NOTES = {"restart": "a gateway restart", "shutdown": "a gateway shutdown"}


def boot(db: Path, minutes: float) -> Turnlog:
    return Turnlog(db, clock=ManualClock(T0 + timedelta(minutes=minutes)))


# A gateway whose agent is busy in a worker thread when the main thread drains, then exits.
DRAIN_WHILE_BUSY = """
import json, os, threading
from turnlog import SessionSource
src = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", message_id="m1")
t = kit.turnlog()
t.start_gateway("main")
busy = threading.Event()
def think(history, item):
    busy.set()
    kit.hang()
threading.Thread(target=t.handle_message, args=(src, "run the migration", think, print), daemon=True).start()
busy.wait()
clean = t.drain(REASON, timeout_s=TIMEOUT)
print(json.dumps({"boot": t.owner, "clean": clean}), flush=True)
os._exit(0)
"""


def test_a_drain_with_nothing_running_stops_clean(db):
    t = boot(db, 0)
    t.start_gateway(GW)
    t.handle_message(alice("m1"), "hello", reply_with("hi"), lambda text: None)
    assert t.drain("shutdown", timeout_s=0.2) is True
    last = t.status(GW).last_boot
    assert (last.state, last.drain_reason, last.drain_timed_out, last.ended_clean) == \
        ("stopped", "shutdown", False, True)
    [begun] = events(t, "GatewayDrainBegun")
    assert (begun.boot_id, begun.reason, begun.timeout_s) == (t.owner, "shutdown", 0.2)
    [stopped] = events(t, "GatewayStopped")
    assert (stopped.clean, stopped.drain_timed_out) == (True, False)
    assert events(t, "ResumePendingMarked") == []

    report = boot(db, 5).start_gateway(GW)
    assert report.previous_clean is True and report.recovery.recovered_boots == []


@pytest.mark.parametrize("reason", ["restart", "shutdown"])
def test_a_turn_running_when_the_drain_times_out_is_resumed_by_the_next_start(db, reason):
    code = DRAIN_WHILE_BUSY.replace("REASON", repr(reason)).replace("TIMEOUT", "0.2")
    out = json.loads(procs.run(db, code, at=T0))
    assert out["clean"] is False
    mark = f"{reason}_timeout"

    t = boot(db, 2)
    last = t.status(GW).last_boot
    assert (last.boot_id, last.state, last.drain_reason, last.drain_timed_out, last.ended_clean) == \
        (out["boot"], "stopped_unclean", reason, True, False)
    [pending] = t.status(GW).resume_pending
    assert pending.resume_reason == mark
    [marked] = events(t, "ResumePendingMarked")
    [begun] = events(t, "GatewayDrainBegun")
    assert marked.position < begun.position  # pre-drain: marked before waiting (#27856)
    [stopped] = events(t, "GatewayStopped")
    assert (stopped.clean, stopped.drain_timed_out) == (False, True)

    report = t.start_gateway(GW)
    assert report.previous_clean is False and report.recovery.recovered_boots == [out["boot"]]
    [turn] = report.recovery.interrupted
    assert (turn.session_id, turn.action) == (pending.session_id, "resume_pending")
    assert t.status(GW).resume_pending[0].resume_reason == mark  # the drain's reason is kept

    notes, sent = [], []
    [outcome] = t.resume_interrupted(lambda h, i: notes.append((h[-1].content, i.text)) or "migrated", sent.append)
    assert outcome.session_id == pending.session_id
    assert f"interrupted by {NOTES[reason]}" in notes[0][0] and notes[0][1] == "run the migration"
    assert sent == ["migrated"]
    assert t.resume_interrupted(never_called, never_called) == []
    assert t.status(GW).resume_pending == []


def test_a_turn_finishing_within_the_drain_timeout_leaves_a_clean_stop(db):
    t = boot(db, 0)
    t.start_gateway(GW)
    release = threading.Event()

    def think(history, item):
        release.wait()
        return "done"

    worker = threading.Thread(target=t.handle_message, args=(alice("m1"), "quick job", think, lambda x: None))
    worker.start()
    watcher = boot(db, 0)  # another reader of the log: the agent finishes once the drain has begun

    def finish_when_draining():
        while watcher.status(GW).last_boot.state != "draining":
            time.sleep(0.01)
        release.set()

    threading.Thread(target=finish_when_draining, daemon=True).start()
    while not t.status(GW).active_turns:
        time.sleep(0.01)
    assert t.drain("restart", timeout_s=60) is True
    worker.join()
    last = t.status(GW).last_boot
    assert (last.state, last.drain_timed_out, last.ended_clean) == ("stopped", False, True)
    assert [e.reason for e in events(t, "ResumePendingMarked")] == ["restart_timeout"]
    assert len(events(t, "ResumePendingCleared")) == 1
    assert t.status(GW).resume_pending == []

    report = boot(db, 5).start_gateway(GW)
    assert report.previous_clean is True and report.recovery.interrupted == []


def test_a_gateway_killed_while_draining_keeps_the_drain_reason(db, tmp_path):
    """#27856: the mark is written before the drain waits, so a SIGKILL during the drain loses nothing."""
    code = DRAIN_WHILE_BUSY.replace("REASON", repr("restart")).replace("TIMEOUT", "600")
    child = procs.start(db, code, at=T0)
    try:
        watcher = boot(db, 0)
        deadline = time.monotonic() + procs.CHILD_TIMEOUT_S
        while getattr(watcher.status(GW).last_boot, "state", None) != "draining":
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        watcher.close()
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate()  # waits, and closes its pipes

    t = boot(db, 2)
    assert t.status(GW).last_boot.state == "draining"
    [pending] = t.status(GW).resume_pending
    assert pending.resume_reason == "restart_timeout"
    [turn] = t.start_gateway(GW).recovery.interrupted
    assert turn.action == "resume_pending"
    notes = []
    [outcome] = t.resume_interrupted(lambda h, i: notes.append(h[-1].content) or "done", lambda x: None)
    assert "interrupted by a gateway restart" in notes[0]


# The reply is persisted and its send is in progress when the drain times out; then the process dies.
DRAIN_WHILE_SENDING = """
import json, os, threading
from turnlog import SessionSource
src = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", message_id="m1")
t = kit.turnlog()
t.start_gateway("main")
busy = threading.Event()
def send(text):
    busy.set()
    kit.hang()
threading.Thread(target=t.handle_message, args=(src, "status?", lambda h, i: "all green", send), daemon=True).start()
busy.wait()
clean = t.drain("restart", timeout_s=0.2)
print(json.dumps({"boot": t.owner, "clean": clean}), flush=True)
os._exit(0)
"""


def test_a_reply_being_sent_when_the_drain_times_out_is_redelivered_not_answered_again(db):
    out = json.loads(procs.run(db, DRAIN_WHILE_SENDING, at=T0))
    assert out["clean"] is False
    t = boot(db, 2)
    assert [r.resume_reason for r in t.status(GW).resume_pending] == ["restart_timeout"]
    [turn] = t.start_gateway(GW).recovery.interrupted
    assert turn.action == "redeliver"

    sent = []
    swept = t.sweep_deliveries(collect(sent))
    assert len(swept.delivered) == 1
    assert len(sent) == 1 and sent[0].startswith(PREFIX) and sent[0].endswith("all green")
    assert t.status(GW).resume_pending == []  # the sweep delivered it: nothing is left to resume
    assert t.resume_interrupted(never_called, never_called) == []
    assert [m["role"] for m in t.transcript(turn.session_id)] == ["user", "assistant"]


def test_a_reply_owed_to_a_platform_not_connected_yet_is_not_answered_again_meanwhile(db):
    """Never both: the turn has its reply, so it is only ever delivered, even while the sweep skips it."""
    json.loads(procs.run(db, DRAIN_WHILE_SENDING, at=T0))
    t = boot(db, 2)
    [turn] = t.start_gateway(GW).recovery.interrupted
    assert turn.action == "redeliver"
    swept = t.sweep_deliveries(never_called, platforms={"discord"})  # Telegram is not connected yet
    assert swept.delivered == [] and len(swept.skipped) == 1
    assert t.resume_interrupted(never_called, never_called) == []
    sent = []
    assert len(t.sweep_deliveries(collect(sent), platforms={"telegram"}).delivered) == 1
    assert len(sent) == 1 and sent[0].endswith("all green")
    assert t.resume_interrupted(never_called, never_called) == []
    assert [m["role"] for m in t.transcript(turn.session_id)] == ["user", "assistant"]
