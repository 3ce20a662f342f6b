"""Acceptance: background delegations that find their owner (docs/behaviour.md §8a).

A delegation is started from a session; its finish, reported by any gateway on the log, becomes
a wake-up on the key it started on, run once by whichever gateway next runs that key's queue.
/stop and /new stop running delegations (an event, then the gateway's hook); a wake-up for a
session /new closed is dropped when processed and never reopens it.
"""

import json

import pytest
from click.testing import CliRunner

from turnlog import DelegationRow, EngineConfig, InvalidRequest, NotFound, QueueFull, ResetPolicies, ResetPolicy
from turnlog.cli import main as cli
from turnlog.domain.inbox import BUSY_CAP

from chat import ALICE, collect, echo

WOKEN = "[Background delegation d1 (crawl the docs) succeeded.]\nfound 3 pages"


class Agent:
    """A responder that records which session each item ran on."""

    def __init__(self):
        self.ran = []

    def __call__(self, history, item):
        self.ran.append((history[-1].session_id, item.kind, item.text))
        return f"re: {item.text}"


def first_turn(t, source=ALICE):
    [outcome] = t.handle_message(source, "please crawl the docs", echo, collect([]))
    return outcome.session_id


def named(t, key_or_session, event):
    return [h for h in t.history(key_or_session) if h.event == event]


@pytest.fixture
def stopped():
    """The handles the gateway's stop hook was called with."""
    return []


@pytest.fixture
def hooked(make_turnlog, stopped):
    """A gateway whose stop hook records into `stopped`."""
    return make_turnlog(owner="gateway-a", on_stop_delegation=stopped.append)


def drain(t, agent, source=ALICE):
    outcomes = []
    while (outcome := t.run_next(source, agent, collect([]))) is not None:
        outcomes.append(outcome)
    return outcomes


# -- finishing ---------------------------------------------------------------------------------


def test_a_finish_reported_by_another_gateway_wakes_the_owning_session_once(t, other):
    session_id = first_turn(t)
    assert t.start_delegation(ALICE, "d1", description="crawl the docs", actor="agent", cause="tool:delegate") == "d1"

    assert other.finish_delegation("d1", "succeeded", "found 3 pages", actor="worker", cause="job:7") is True
    [item] = t.queue(ALICE)
    assert (item.kind, item.text) == ("wakeup", WOKEN)

    agent = Agent()
    assert [o.session_id for o in drain(t, agent)] == [session_id]
    assert agent.ran == [(session_id, "wakeup", WOKEN)]
    assert drain(other, agent) == [] and t.queue(ALICE) == []

    [started] = named(t, session_id, "DelegationStarted")
    assert (started.actor, started.cause, started.data["handle"]) == ("agent", "tool:delegate", "d1")
    assert started.data["session_key"] == t.routing_key(ALICE)
    [finished] = named(t, session_id, "DelegationFinished")
    assert (finished.actor, finished.cause, finished.data["status"]) == ("worker", "job:7", "succeeded")
    assert finished.summary == "delegation succeeded, wake-up item 2: found 3 pages"


def test_a_second_finish_of_the_same_handle_is_refused_and_recorded_once(t, other):
    session_id = first_turn(t)
    t.start_delegation(ALICE, "d1")
    assert other.finish_delegation("d1", "succeeded", "first") is True
    assert t.finish_delegation("d1", "failed", "second") is False
    assert other.finish_delegation("d1", "succeeded", "first") is False

    assert len(named(t, session_id, "DelegationFinished")) == 1
    agent = Agent()
    drain(t, agent)
    assert [text for _, _, text in agent.ran] == ["[Background delegation d1 succeeded.]\nfirst"]


def test_the_delegations_are_listed_with_their_state(t):
    session_id = first_turn(t)
    t.start_delegation(ALICE, "d1", description="crawl the docs")
    t.start_delegation(session_id, "d2")  # by session id: the wake-up goes to the key it started on
    t.finish_delegation("d2", "failed", "timed out")

    rows = t.delegations()
    assert all(isinstance(r, DelegationRow) for r in rows)
    assert [(r.handle, r.state, r.status) for r in rows] == [("d1", "running", None), ("d2", "finished", "failed")]
    assert [r.handle for r in t.delegations(session=ALICE, state="running")] == ["d1"]
    assert [r.handle for r in t.delegations(session=session_id, state="finished")] == ["d2"]
    assert [i.text for i in t.queue(ALICE)] == ["[Background delegation d2 failed.]\ntimed out"]


def test_a_wake_up_for_one_session_is_not_merged_into_another_wake_up(t):
    first_turn(t)
    t.accept(ALICE, "cron fired", kind="wakeup")
    t.start_delegation(ALICE, "d1")
    t.finish_delegation("d1", "succeeded", "done")
    assert [i.text for i in t.queue(ALICE)] == ["cron fired", "[Background delegation d1 succeeded.]\ndone"]


def test_a_finish_is_accepted_even_when_the_queue_is_full(t):
    first_turn(t)
    t.start_delegation(ALICE, "d1")
    for i in range(BUSY_CAP):
        t.accept(ALICE, f"task {i}", kind="queued")
    with pytest.raises(QueueFull):
        t.accept(ALICE, "one too many", kind="queued")
    assert t.finish_delegation("d1", "succeeded", "done") is True
    assert t.queue(ALICE)[-1].text == "[Background delegation d1 succeeded.]\ndone"


def test_bad_starts_and_finishes_are_refused(t):
    with pytest.raises(NotFound):
        t.start_delegation(ALICE, "d1")  # no session on the key yet
    first_turn(t)
    t.start_delegation(ALICE, "d1")
    with pytest.raises(InvalidRequest):
        t.start_delegation(ALICE, "d1")  # the handle is taken
    with pytest.raises(InvalidRequest):
        t.finish_delegation("d1", "done")
    with pytest.raises(NotFound):
        t.finish_delegation("nope")
    assert t.start_delegation(ALICE).startswith("dlg_")


# -- /stop and /new ------------------------------------------------------------------------------


def test_stop_on_an_idle_session_stops_its_delegations_through_the_hook(hooked, stopped):
    t = hooked
    session_id = first_turn(t)
    t.start_delegation(ALICE, "d1")
    t.start_delegation(ALICE, "d2")

    result = t.command(ALICE, "/stop")
    assert (result.reply, result.changed) == ("Stopped.", True)
    assert stopped == ["d1", "d2"]
    events = named(t, session_id, "DelegationStopped")
    assert [(e.actor, e.cause, e.data["reason"]) for e in events] == [("telegram:user:42", "command:/stop", "stop")] * 2
    assert [r.state for r in t.delegations(session=session_id)] == ["stopped", "stopped"]

    assert t.command(ALICE, "/stop").reply == "No active task to stop."  # stopping twice is one stop
    assert stopped == ["d1", "d2"]


def test_a_hook_that_raises_does_not_undo_the_stop(make_turnlog):
    def broken(handle):
        raise RuntimeError("adapter gone")

    t = make_turnlog(owner="gateway-a", on_stop_delegation=broken)
    first_turn(t)
    t.start_delegation(ALICE, "d1")
    assert t.command(ALICE, "/stop").reply == "Stopped."
    assert [r.state for r in t.delegations()] == ["stopped"]


@pytest.mark.parametrize("command", ["/new", "/reset"])
def test_new_and_reset_stop_the_sessions_delegations(hooked, stopped, command):
    t = hooked
    session_id = first_turn(t)
    t.start_delegation(ALICE, "d1")
    t.command(ALICE, command)
    assert stopped == ["d1"]
    [event] = named(t, session_id, "DelegationStopped")
    assert (event.cause, event.data["reason"]) == (f"command:{command}", "session_reset")
    [cleared] = named(t, session_id, "ConversationScopeCleared")
    assert cleared.data["interrupted_children"] == ["d1"]


# -- wake-ups and /stop, /new, /reset --------------------------------------------------------------


def test_a_wake_up_survives_stop(t):
    session_id = first_turn(t)
    t.start_delegation(ALICE, "d1")
    t.finish_delegation("d1", "succeeded", "done")
    t.accept(ALICE, "never mind")
    assert t.command(ALICE, "/stop").reply == "Stopped."  # drops the human follow-up only
    agent = Agent()
    drain(t, agent)
    assert agent.ran == [(session_id, "wakeup", "[Background delegation d1 succeeded.]\ndone")]


def test_a_stopped_delegation_may_still_report_its_finish(t):
    session_id = first_turn(t)
    t.start_delegation(ALICE, "d1")
    t.command(ALICE, "/stop")
    assert t.finish_delegation("d1", "cancelled", "partial output") is True
    agent = Agent()
    drain(t, agent)
    assert agent.ran == [(session_id, "wakeup", "[Background delegation d1 cancelled.]\npartial output")]


@pytest.mark.parametrize("command", ["/new", "/reset"])
def test_a_wake_up_for_a_session_new_closed_is_dropped_and_does_not_reopen_it(t, command):
    session_id = first_turn(t)
    t.start_delegation(ALICE, "d1")
    t.command(ALICE, command)
    t.finish_delegation("d1", "cancelled", "partial")  # the unit wraps up after the reset
    assert [i.kind for i in t.queue(ALICE)] == ["wakeup"]  # kept by the command; judged when processed

    agent = Agent()
    assert drain(t, agent) == []
    assert agent.ran == [] and t.queue(ALICE) == []
    assert [s.session_id for s in t.sessions()] == [session_id]  # not reopened, no new session made for it
    assert t.session(session_id).ended_at is not None
    [dropped] = named(t, ALICE, "InboundDropped")
    assert (dropped.data["reason"], dropped.actor) == ("owner_session_closed", "system:wakeup")

    [outcome] = t.handle_message(ALICE, "hello again", agent, collect([]))  # the chat carries on
    assert outcome.session_id != session_id
    assert [kind for _, kind, _ in agent.ran] == ["human"]


def test_a_wake_up_waiting_through_new_runs_only_on_a_new_session_of_its_own(t):
    """A wake-up pinned to the old session and queued before /new: the next message's new
    session does not get it, the new session's own delegations do."""
    old = first_turn(t)
    t.start_delegation(ALICE, "d1")
    t.finish_delegation("d1", "succeeded", "old result")
    t.command(ALICE, "/new")
    agent = Agent()
    [first] = t.handle_message(ALICE, "new topic", agent, collect([]))
    assert first.session_id != old
    assert [text for _, _, text in agent.ran] == ["new topic"]

    t.start_delegation(ALICE, "d2")
    t.finish_delegation("d2", "succeeded", "new result")
    drain(t, agent)
    assert agent.ran[-1] == (first.session_id, "wakeup", "[Background delegation d2 succeeded.]\nnew result")


def test_a_wake_up_for_a_session_the_reset_policy_expired_is_dropped_without_making_one(make_turnlog, clock):
    t = make_turnlog(config=EngineConfig(reset=ResetPolicies(default=ResetPolicy(mode="idle", idle_minutes=60))))
    session_id = first_turn(t)
    t.start_delegation(ALICE, "d1")
    clock.advance(hours=2)  # the session idled out: the next message gets a new one
    t.finish_delegation("d1", "succeeded", "late result")
    agent = Agent()
    assert drain(t, agent) == [] and agent.ran == []
    assert [s.session_id for s in t.sessions()] == [session_id]
    assert [h.data["reason"] for h in named(t, ALICE, "InboundDropped")] == ["owner_session_closed"]


def test_a_wake_up_whose_session_is_replaced_while_it_starts_is_judged_again_and_dropped(make_turnlog, clock):
    """The race: judged runnable, then routing it would replace the session (here a background
    process that kept the idle session alive ended in between): the start under the lease refuses
    it, nothing of that start is saved, and it is judged again at once and dropped."""
    pinned_by_background = iter([True])  # the first look (the judgement) sees it pinned, later ones not

    def guard(session_key, session_id):
        return next(pinned_by_background, False)

    t = make_turnlog(config=EngineConfig(reset=ResetPolicies(default=ResetPolicy(mode="idle", idle_minutes=60)),
                                         background_guard=guard))
    session_id = first_turn(t)
    t.start_delegation(ALICE, "d1")
    clock.advance(hours=2)
    t.finish_delegation("d1", "succeeded", "late result")
    t.accept(ALICE, "are you there?")
    agent = Agent()
    outcome = t.run_next(ALICE, agent, collect([]))  # the same call goes on to the next item
    assert outcome is not None and outcome.session_id != session_id
    assert agent.ran == [(outcome.session_id, "human", "are you there?")]
    assert t.queue(ALICE) == []
    assert [h.data["reason"] for h in named(t, ALICE, "InboundDropped")] == ["owner_session_closed"]
    # The refused start saved nothing: the only new session is the human message's.
    assert [s.session_id for s in t.sessions()] == [session_id, outcome.session_id]


def test_a_wake_up_is_judged_when_processed_not_when_queued(t):
    """/new then /resume of the old session before the wake-up runs: its session owns the key again."""
    old = first_turn(t)
    t.start_delegation(ALICE, "d1")
    t.finish_delegation("d1", "succeeded", "done")
    t.command(ALICE, "/new")
    assert t.command(ALICE, f"/resume {old}").reply == f"Resumed session {old}."
    agent = Agent()
    drain(t, agent)
    assert agent.ran == [(old, "wakeup", "[Background delegation d1 succeeded.]\ndone")]


def test_after_a_compression_rotation_the_continuing_session_gets_the_wake_up_and_stops_them(hooked, stopped):
    t = hooked
    parent = first_turn(t)
    t.start_delegation(ALICE, "d1")
    t.start_delegation(ALICE, "d2")
    token = t.turns.acquire_lease(parent, t.routing_key(ALICE))
    child = t.turns.rotate_session(token, ALICE)
    t.turns.release_lease(child)

    t.finish_delegation("d1", "succeeded", "done")
    agent = Agent()
    drain(t, agent)
    assert agent.ran == [(child.session_id, "wakeup", "[Background delegation d1 succeeded.]\ndone")]
    assert t.command(ALICE, "/stop").reply == "Stopped."  # the parent's running delegation
    assert stopped == ["d2"]


# -- the CLI -------------------------------------------------------------------------------------


def test_the_cli_lists_delegations(t, db):
    session_id = first_turn(t)
    t.start_delegation(ALICE, "d1", description="crawl the docs")
    t.start_delegation(ALICE, "d2")
    t.finish_delegation("d2", "succeeded", "ok")
    runner = CliRunner()
    table = runner.invoke(cli, ["--db", db, "delegations", "--session", session_id])
    assert table.exit_code == 0, table.output
    assert "d1" in table.output and "crawl the docs" in table.output and "finished" in table.output
    as_json = runner.invoke(cli, ["--db", db, "delegations", "--state", "running", "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert [r["handle"] for r in json.loads(as_json.output)] == ["d1"]
    bad = runner.invoke(cli, ["--db", db, "delegations", "--session", "nope"])
    assert bad.exit_code == 1 and "Traceback" not in bad.output
    history = runner.invoke(cli, ["--db", db, "history", t.routing_key(ALICE)])
    assert history.exit_code == 0, history.output
    for line in ("delegation d1 started: crawl the docs", "delegation succeeded, wake-up item 2: ok",
                 "wake-up item 2 pinned to " + session_id):
        assert line in history.output
