"""Acceptance: a delegation's result finds its owner across processes (docs/behaviour.md §8a).

The gateway that started the delegation is SIGKILLed; another real process reports the finish;
the next gateway runs the wake-up once, on the session that started the work. The gateways
running the key's queue race as real processes too: exactly one of them runs it.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from harness import procs
from turnlog import ManualClock, SessionSource, Turnlog

T0 = datetime(2026, 11, 1, 10, 0, tzinfo=timezone.utc)
SRC = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", user_name="alice")
RESULT = "[Background delegation d1 (crawl the docs) succeeded.]\nfound 3 pages"

HEAD = """
from turnlog import SessionSource
src = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", user_name="alice",
                    message_id=MESSAGE_ID)
t = kit.turnlog()
"""

# The agent starts the delegation inside its turn (as a tool would) and answers; the gateway is
# then killed while idle, its delegation still running somewhere else.
STARTED_THEN_IDLE = HEAD.replace("MESSAGE_ID", "'m1'") + """
t.start_gateway("main")
def agent(history, item):
    t.start_delegation(src, "d1", description="crawl the docs", actor="agent", cause="tool:delegate")
    return "on it: I will report back"
[outcome] = t.handle_message(src, "please crawl the docs", agent, print)
kit.ready(session_id=outcome.session_id)
kit.hang()
"""

# Killed inside the agent, right after it started the delegation: the turn holds its lease.
STARTED_THEN_KILLED_MID_TURN = HEAD.replace("MESSAGE_ID", "'m1'") + """
t.start_gateway("main")
def agent(history, item):
    t.start_delegation(src, "d1", description="crawl the docs", actor="agent", cause="tool:delegate")
    kit.ready(session_id=history[-1].session_id)
    kit.hang()
t.handle_message(src, "please crawl the docs", agent, print)
"""

FINISHER = """
t = kit.turnlog(owner="worker")
print(json.dumps([t.finish_delegation("d1", "succeeded", "found 3 pages", actor="worker", cause="job:7")
                  for _ in range(2)]))
"""

RACER = HEAD.replace("MESSAGE_ID", "None") + """
import json, os, time
go = kit.work / "go"
while not go.exists():
    time.sleep(0.005)
ran = []
def agent(history, item):
    ran.append([history[-1].session_id, item.kind, item.text])
    return "thanks, noted"
while t.run_next(src, agent, print) is not None:
    pass
print(json.dumps(ran))
"""


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def finish_elsewhere(db) -> list[bool]:
    return json.loads(procs.run(db, "import json\n" + FINISHER, at=at(1)).strip())


def race(db, tmp_path, racers: int = 2) -> list[list[list[str]]]:
    """Run the key's queue from `racers` real processes started together; what each ran."""
    go = tmp_path / "go"
    children = [procs.start(db, RACER, at=at(3)) for _ in range(racers)]
    go.write_text("go")
    outs = []
    for child in children:
        out, err = child.communicate(timeout=procs.CHILD_TIMEOUT_S)
        assert child.returncode == 0, err.decode()
        outs.append(json.loads(out.decode().strip().splitlines()[-1]))
    return outs


def wake_ups(t: Turnlog, session_id: str) -> list[str]:
    return [m["content"] for m in t.transcript(session_id) if m["content"] == RESULT]


def test_finished_in_another_process_after_the_starting_gateway_was_killed_the_wake_up_runs_once(db, tmp_path):
    killed = procs.crash(db, STARTED_THEN_IDLE, at=at(0))
    session_id = killed.data["session_id"]

    assert finish_elsewhere(db) == [True, False]  # a second finish is refused: recorded once

    with Turnlog(db, clock=ManualClock(at(2))) as t:
        t.start_gateway("main")  # the next boot: recovers the dead one's records
        assert [(i.kind, i.text) for i in t.queue(SRC)] == [("wakeup", RESULT)]
    ran = race(db, tmp_path)
    assert sorted(ran, key=len) == [[], [[session_id, "wakeup", RESULT]]]

    with Turnlog(db, clock=ManualClock(at(4))) as t:
        assert wake_ups(t, session_id) == [RESULT]
        assert t.queue(SRC) == []
        [row] = t.delegations(session=session_id)
        assert (row.state, row.status, row.finished_by) == ("finished", "succeeded", "worker")
        assert len([h for h in t.history(session_id) if h.event == "DelegationFinished"]) == 1


def test_killed_mid_turn_the_resumed_session_still_gets_the_result_once(db, tmp_path):
    killed = procs.crash(db, STARTED_THEN_KILLED_MID_TURN, at=at(0))
    session_id = killed.data["session_id"]
    assert finish_elsewhere(db) == [True, False]

    with Turnlog(db, clock=ManualClock(at(2))) as t:
        t.start_gateway("main")
        resumed = t.resume_interrupted(lambda history, item: "restored: waiting for the crawl", print)
        assert [o.session_id for o in resumed] == [session_id]
    ran = race(db, tmp_path)
    assert sorted(ran, key=len) == [[], [[session_id, "wakeup", RESULT]]]
    with Turnlog(db, clock=ManualClock(at(4))) as t:
        assert wake_ups(t, session_id) == [RESULT]
        assert t.queue(SRC) == []
