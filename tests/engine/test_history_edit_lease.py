"""The step every edit of the agent's history takes (HistoryEdits.under_lease), held for slow work
(a compaction's summariser): a step that raises leaves nothing of the edit and frees the lease; a
running turn refuses it; the lease's log shows the edit's holding."""

from __future__ import annotations

import threading
import warnings

import pytest

from turnlog import SessionBusy, Turnlog
from turnlog.commands.history_edits import HistoryEdits
from turnlog.commands.lease import LeaseCommands

from chat import alice, echo


def edits_of(t: Turnlog) -> HistoryEdits:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx = t.ctx  # deprecated public attribute: the engine's command context
    return HistoryEdits(ctx, LeaseCommands(ctx, "test:editor"))


def test_a_held_edit_whose_step_raises_changes_nothing_and_frees_the_lease(t):
    session_id = t.handle_message(alice("m1"), "one", echo, lambda text: None)[0].session_id

    def step(editing):
        raise RuntimeError("the summariser failed")
    with pytest.raises(RuntimeError):
        edits_of(t).under_lease(session_id, step, actor="test", cause="test", hold=True)
    assert t.turns.holder(session_id) is None
    assert [e.summary for e in t.history(session_id) if e.event == "LeaseReleased"][-1].endswith("(failed)")
    assert [m.content for m in t.turns.agent_history(session_id)] == ["one", "re: one"]
    t.handle_message(alice("m2"), "two", echo, lambda text: None)  # the session is not wedged


@pytest.mark.parametrize("hold", [False, True], ids=["in-one-transaction", "held"])
def test_an_edit_is_refused_while_a_turn_runs(t, hold):
    session_id = t.handle_message(alice("m1"), "one", echo, lambda text: None)[0].session_id
    started, finish = threading.Event(), threading.Event()

    def slow(history, item):
        started.set()
        assert finish.wait(10)
        return "done"
    runner = threading.Thread(target=t.handle_message, args=(alice("m2"), "two", slow, lambda text: None))
    runner.start()
    try:
        assert started.wait(10)
        with pytest.raises(SessionBusy):
            edits_of(t).under_lease(session_id, lambda editing: (None, []), actor="test", cause="test", hold=hold)
    finally:
        finish.set()
        runner.join(10)
    assert edits_of(t).undo(session_id, actor="test", cause="test").turns == 1
    released = [e.summary for e in t.history(session_id) if e.event == "LeaseReleased"]
    assert released[-1].endswith("(edited)")
