"""/undo [N] through the chat path: the backed-up turns leave the agent's history (they stay in
the log), the reply echoes them, N clamps, nothing to undo says so, and a running turn refuses it."""

from __future__ import annotations

import threading

from turnlog import Turnlog

from chat import alice, collect


class Agent:
    """Answers "re: <text>" and keeps what each turn was handed."""

    def __init__(self) -> None:
        self.histories: list[list[tuple[str, str]]] = []

    def __call__(self, history, item) -> str:
        self.histories.append([(m.role, m.content) for m in history])
        return f"re: {item.text}"


def chat(t: Turnlog, agent: Agent, *texts: str) -> str:
    sent: list[str] = []
    for i, text in enumerate(texts):
        [outcome] = t.handle_message(alice(f"{text}-{i}"), text, agent, collect(sent))
    return outcome.session_id


def test_undo_then_a_new_turn_the_agent_never_sees_the_undone_rows(t):
    agent = Agent()
    session_id = chat(t, agent, "one", "two", "three")
    result = t.command(alice("u1"), "/undo")
    assert result.changed and result.session_id == session_id
    assert "Undid 1 turn(s) (2 message(s))" in result.reply and "“three”" in result.reply
    t.handle_message(alice("m4"), "four", agent, collect([]))
    assert agent.histories[-1] == [("user", "one"), ("assistant", "re: one"), ("user", "two"),
                                   ("assistant", "re: two"), ("user", "four")]
    # Nothing left the log.
    assert [m["content"] for m in t.transcript(session_id)] == [
        "one", "re: one", "two", "re: two", "three", "re: three", "four", "re: four"]
    [undone] = [e for e in t.history(session_id) if e.event == "TurnsUndone"]
    assert undone.actor == "telegram:user:42" and undone.cause == "command:/undo:u1"
    assert (undone.data["from_seq"], undone.data["upto_seq"], undone.data["turns"]) == (5, 6, 1)


def test_undo_n_echoes_each_backed_up_message_cut_to_200_characters_and_clamps(t):
    agent = Agent()
    long = "x" * 300
    chat(t, agent, "first", long)
    result = t.command(alice("u1"), "/undo 5")
    assert "Undid 2 turn(s) (4 message(s))" in result.reply
    assert "“first”" in result.reply and f"“{'x' * 200}”" in result.reply and "x" * 201 not in result.reply
    assert t.command(alice("u2"), "/undo").reply == "Nothing to undo."
    assert t.turns.agent_history(t.session(alice()).session_id) == []


def test_nothing_to_undo_and_a_bad_count(t):
    assert t.command(alice("u0"), "/undo").reply == "Nothing to undo."  # no session yet: none is made
    assert t.sessions() == []
    chat(t, Agent(), "hello")
    assert t.command(alice("u1"), "/undo two").reply == "Invalid count “two” — use /undo or /undo N."
    assert t.command(alice("u2"), "/undo 0").changed  # clamps up to 1, as Hermes


def test_undo_while_a_turn_holds_the_lease_is_refused(t):
    agent = Agent()
    session_id = chat(t, agent, "one")
    started, finish = threading.Event(), threading.Event()

    def slow(history, item):
        started.set()
        assert finish.wait(10)
        return "done"
    runner = threading.Thread(target=t.handle_message, args=(alice("m2"), "two", slow, collect([])))
    runner.start()
    try:
        assert started.wait(10)
        result = t.command(alice("u1"), "/undo")
        assert not result.changed and result.reply.startswith("⏳ A turn is running — /undo can't run mid-turn")
        assert not [e for e in t.history(session_id) if e.event == "TurnsUndone"]
    finally:
        finish.set()
        runner.join(10)
    assert t.command(alice("u2"), "/undo").changed  # once the turn is over


def test_a_redelivered_undo_is_not_run_twice(t):
    chat(t, Agent(), "one", "two")
    assert t.command(alice("u1"), "/undo").changed
    again = t.command(alice("u1"), "/undo")
    assert again.duplicate and not again.changed
    assert len(t.turns.agent_history(t.session(alice()).session_id)) == 2


def test_undo_of_a_compacted_range_reaches_only_the_turns_after_the_summary(t):
    agent = Agent()
    session_id = chat(t, agent, "one", "two", "three")
    t.compact(session_id, summary="they said one and two", keep_turns=1)
    result = t.command(alice("u1"), "/undo 10")  # clamps to the one turn after the summary
    assert "Undid 1 turn(s) (2 message(s))" in result.reply and "“three”" in result.reply
    assert "“one”" not in result.reply
    assert t.command(alice("u2"), "/undo").reply == "Nothing to undo."  # the summary is not a turn
    t.handle_message(alice("m4"), "four", agent, collect([]))
    assert agent.histories[-1] == [("user", "they said one and two"), ("user", "four")]
    assert [(m["seq"], m["fate"]) for m in t.transcript(session_id)] == [
        (1, "compacted"), (2, "compacted"), (3, "compacted"), (4, "compacted"), (5, "undone"), (6, "undone"),
        (7, None), (8, None)]


def test_a_reader_whose_read_models_are_behind_still_sees_the_fates(t, db):
    session_id = chat(t, Agent(), "one", "two")
    t.undo(session_id)  # nothing catches the read models up after it
    with Turnlog(db, read_only=True) as reader:
        assert reader.maintenance.projections_behind() > 0
        assert [m["fate"] for m in reader.transcript(session_id)] == [None, None, "undone", "undone"]
    assert [m["fate"] for m in t.transcript(session_id)] == [None, None, "undone", "undone"]
