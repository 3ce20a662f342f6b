"""Acceptance: the durable inbound queue, one test per rule of docs/behaviour.md §8 as turnlog implements it.

See the docstring of turnlog/domain/inbox.py: accepted = an event before processing; pending
items are served strictly in order, one turn per item; a burst of human messages merges into
the human item at the tail, wake-ups merge the same way, a /queue item never merges; at most
32 items wait per key.
"""

import pytest

from harness import procs
from turnlog import SessionSource, StaleLease, Turnlog, TurnlogError

from chat import ALICE

BUSY_CAP = 32


class Agent:
    """A responder that records what each turn was asked; replies 're: <text>'."""

    def __init__(self, during=None):
        self.items = []
        self.histories = []
        self.during = during

    def __call__(self, history, item):
        self.items.append((item.kind, item.text))
        self.histories.append([(m.role, m.content) for m in history])
        if self.during is not None:
            self.during(item)
        return f"re: {item.text}"


class Outbox:
    def __init__(self):
        self.sent = []

    def __call__(self, text):
        self.sent.append(text)


def drain(t, source, agent, outbox=None):
    outcomes = []
    while (o := t.run_next(source, agent, outbox or Outbox())) is not None:
        outcomes.append(o)
    return outcomes


def pending(t, source=ALICE):
    return [(q.kind, q.text) for q in t.queue(source) if q.state == "pending"]


def events(t, source=ALICE, name=None):
    return [h for h in t.history(source) if name is None or h.event == name]


# -- accepted = recorded before anything is done with it --------------------------------------


def test_accepted_message_is_an_event_before_processing(t):
    accepted = t.accept(ALICE, "hello")
    assert accepted.merged is False
    assert accepted.depth == 1
    rows = t.queue(ALICE)
    assert [(r.kind, r.text, r.state, r.session_id) for r in rows] == [("human", "hello", "pending", None)]
    recorded = events(t, name="InboundAccepted")
    assert [(h.data["kind"], h.data["text"]) for h in recorded] == [("human", "hello")]
    assert recorded[0].position == accepted.position
    # nothing was processed: no turn, no transcript message, no lease
    assert not events(t, name="MessageAppended")
    assert not events(t, name="LeaseAcquired")

    outcome = t.run_next(ALICE, Agent(), Outbox())
    assert outcome.item_id == accepted.item_id
    names = [h.event for h in events(t)]
    assert names.index("InboundAccepted") < names.index("InboundStarted") < names.index("MessageAppended")
    assert names[-1] == "InboundCompleted"
    assert t.queue(ALICE) == []


# -- human bursts merge into the pending tail --------------------------------------------------


def test_burst_of_human_messages_merges_into_one_turn(t):
    first = t.accept(ALICE, "a")
    second = t.accept(ALICE, "b")
    assert second.merged is True
    assert second.item_id == first.item_id
    assert second.depth == 1
    assert pending(t) == [("human", "a\nb")]

    agent, outbox = Agent(), Outbox()
    outcomes = drain(t, ALICE, agent, outbox)
    assert len(outcomes) == 1
    assert agent.items == [("human", "a\nb")]
    assert outbox.sent == ["re: a\nb"]
    assert [(m["role"], m["content"]) for m in t.transcript(outcomes[0].session_id)] == [
        ("user", "a\nb"), ("assistant", "re: a\nb")]


def test_human_message_does_not_merge_into_a_started_item(t, other):
    """A follow-up typed while a turn runs waits for the next turn instead of joining the running one."""
    t.accept(ALICE, "first")

    def follow_up(item):
        if item.text == "first":
            assert other.accept(ALICE, "second").merged is False

    agent = Agent(during=follow_up)
    outcomes = drain(t, ALICE, agent)
    assert agent.items == [("human", "first"), ("human", "second")]
    assert len(outcomes) == 2


# -- /queue items never merge: one turn each, FIFO ---------------------------------------------


def test_queue_command_items_never_merge_and_each_is_one_turn_in_order(t):
    replies = [t.command(ALICE, f"/queue {text}").reply for text in ("one", "two", "three")]
    assert replies == ["Queued for the next turn.", "Queued for the next turn. (2 queued)",
                       "Queued for the next turn. (3 queued)"]
    assert pending(t) == [("queued", "one"), ("queued", "two"), ("queued", "three")]

    agent = Agent()
    outcomes = drain(t, ALICE, agent)
    assert agent.items == [("queued", "one"), ("queued", "two"), ("queued", "three")]
    assert len(outcomes) == 3
    assert len({o.turn_id for o in outcomes}) == 3
    sid = outcomes[0].session_id
    assert [(m["role"], m["content"]) for m in t.transcript(sid)] == [
        ("user", "one"), ("assistant", "re: one"), ("user", "two"), ("assistant", "re: two"),
        ("user", "three"), ("assistant", "re: three")]


def test_queue_items_and_human_messages_keep_their_order_without_merging_across(t):
    t.accept(ALICE, "h1")
    t.command(ALICE, "/queue q1")     # not merged into the human tail
    t.accept(ALICE, "h2")             # tail is a /queue item: a new human item
    t.accept(ALICE, "h3")             # merges into h2
    t.command(ALICE, "/q q2")         # the alias
    t.accept(ALICE, "h4", kind="queued")
    assert pending(t) == [("human", "h1"), ("queued", "q1"), ("human", "h2\nh3"), ("queued", "q2"),
                          ("queued", "h4")]
    agent = Agent()
    drain(t, ALICE, agent)
    assert agent.items == [("human", "h1"), ("queued", "q1"), ("human", "h2\nh3"), ("queued", "q2"),
                           ("queued", "h4")]


def test_queue_command_without_text_shows_usage_and_queues_nothing(t):
    result = t.command(ALICE, "/queue")
    assert result.changed is False
    assert result.reply.startswith("Usage: /queue")
    assert t.queue(ALICE) == []


# -- wake-ups merge with a pending wake-up ------------------------------------------------------


def test_internal_wakeups_merge_with_a_pending_wakeup(t):
    w1 = t.accept(ALICE, "delegation finished", kind="wakeup")
    w2 = t.accept(ALICE, "cron fired", kind="wakeup")
    assert w2.merged is True and w2.item_id == w1.item_id
    h = t.accept(ALICE, "hello")                 # a human message never joins a wake-up
    assert h.merged is False
    w3 = t.accept(ALICE, "another", kind="wakeup")  # nor a wake-up a human item
    assert w3.merged is False
    assert pending(t) == [("wakeup", "delegation finished\ncron fired"), ("human", "hello"), ("wakeup", "another")]
    agent = Agent()
    drain(t, ALICE, agent)
    assert agent.items == [("wakeup", "delegation finished\ncron fired"), ("human", "hello"),
                           ("wakeup", "another")]
    accepted = events(t, name="InboundAccepted")
    assert [h.actor for h in accepted if h.data["kind"] == "wakeup"] == ["system:wakeup"] * 3


# -- depth -------------------------------------------------------------------------------------


def test_queue_depth_counts_waiting_items_not_messages(t):
    assert t.accept(ALICE, "a").depth == 1
    assert t.accept(ALICE, "b").depth == 1          # merged
    assert t.accept(ALICE, "q", kind="queued").depth == 2
    assert t.accept(ALICE, "w", kind="wakeup").depth == 3
    assert len(t.queue(ALICE)) == 3
    t.run_next(ALICE, Agent(), Outbox())
    assert len(t.queue(ALICE)) == 2
    assert t.accept(ALICE, "c").depth == 3


# -- busy cap ----------------------------------------------------------------------------------


def test_busy_cap_refuses_the_33rd_item_and_records_the_refusal(t):
    for i in range(BUSY_CAP):
        assert t.accept(ALICE, f"q{i}", kind="queued").depth == i + 1
    with pytest.raises(TurnlogError) as err:
        t.accept(ALICE, "q32", kind="queued")
    assert "32" in str(err.value)
    assert t.routing_key(ALICE) in str(err.value)
    with pytest.raises(TurnlogError):
        t.accept(ALICE, "a human line", kind="human")     # would be a new item too
    result = t.command(ALICE, "/queue q33")
    assert result.changed is False
    assert result.reply.startswith("Not queued:") and "32" in result.reply

    assert len(t.queue(ALICE)) == BUSY_CAP
    assert "q32" not in [q.text for q in t.queue(ALICE)]
    rejected = events(t, name="InboundRejected")
    assert [(h.data["kind"], h.data["text"], h.data["reason"]) for h in rejected] == [
        ("queued", "q32", "busy_cap"), ("human", "a human line", "busy_cap"), ("queued", "q33", "busy_cap")]

    # once a turn has taken an item, there is room again
    t.run_next(ALICE, Agent(), Outbox())
    assert t.accept(ALICE, "q34", kind="queued").depth == BUSY_CAP


def test_busy_cap_still_lets_a_burst_merge_into_the_tail(t):
    for i in range(BUSY_CAP - 1):
        t.accept(ALICE, f"q{i}", kind="queued")
    assert t.accept(ALICE, "h1").depth == BUSY_CAP
    merged = t.accept(ALICE, "h2")   # adds no item, so it is not refused
    assert merged.merged is True
    assert pending(t)[-1] == ("human", "h1\nh2")
    assert not events(t, name="InboundRejected")


# -- /stop -------------------------------------------------------------------------------------


def test_stop_when_idle_says_no_active_task(t):
    assert t.command(ALICE, "/stop").reply == "No active task to stop."
    t.handle_message(ALICE, "hi", Agent(), Outbox())  # a finished turn is not an active task
    result = t.command(ALICE, "/stop")
    assert result.reply == "No active task to stop."
    assert result.changed is False
    assert not events(t, name="LeaseRevoked")


def test_stop_drops_the_pending_human_message_but_keeps_wakeups_and_queue_items(t):
    t.accept(ALICE, "w1", kind="wakeup")
    t.accept(ALICE, "h1")
    t.accept(ALICE, "h2")
    t.command(ALICE, "/queue q1")
    t.accept(ALICE, "h3")
    result = t.command(ALICE, "/stop")
    assert result.reply == "Stopped."
    assert result.changed is True
    assert pending(t) == [("wakeup", "w1"), ("queued", "q1")]
    dropped = events(t, name="InboundDropped")
    assert len(dropped) == 1 and dropped[0].data["reason"] == "stop"
    assert len(dropped[0].data["item_ids"]) == 2
    agent = Agent()
    drain(t, ALICE, agent)
    assert agent.items == [("wakeup", "w1"), ("queued", "q1")]


def test_stop_revokes_the_running_turn_whose_later_write_is_refused(t, other):
    """/stop from another process while a turn runs: the turn's reply is refused and leaves no trace."""
    stops = []

    def stop_midway(item):
        if item.text == "long task":
            other.accept(ALICE, "follow-up")            # dropped by /stop
            other.command(ALICE, "/queue queued later")  # kept by /stop
            other.accept(ALICE, "tick", kind="wakeup")   # kept by /stop
            stops.append(other.command(ALICE, "/stop"))

    t.accept(ALICE, "long task")
    outbox = Outbox()
    with pytest.raises(StaleLease):
        t.run_next(ALICE, Agent(during=stop_midway), outbox)
    assert [s.reply for s in stops] == ["Stopped."]
    sid = stops[0].session_id
    assert t.turns.holder(sid) is None
    revoked = [h for h in t.history(sid) if h.event == "LeaseRevoked"]
    assert [h.data["reason"] for h in revoked] == ["stop"]
    # the user message stays; the late reply and its delivery never happened
    assert [(m["role"], m["content"]) for m in t.transcript(sid)] == [("user", "long task")]
    assert outbox.sent == []
    assert t.ledger() == []
    assert pending(t) == [("queued", "queued later"), ("wakeup", "tick")]

    agent = Agent()
    drain(t, ALICE, agent)
    assert agent.items == [("queued", "queued later"), ("wakeup", "tick")]


# -- /new and /reset ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["/new", "/reset"])
def test_new_and_reset_drop_human_and_queue_items_but_keep_wakeups(t, command):
    t.handle_message(ALICE, "earlier", Agent(), Outbox())
    t.accept(ALICE, "w1", kind="wakeup")
    t.accept(ALICE, "h1")
    t.command(ALICE, "/queue q1")
    t.accept(ALICE, "w2", kind="wakeup")
    t.accept(ALICE, "h2")
    result = t.command(ALICE, command)
    assert result.changed is True
    assert pending(t) == [("wakeup", "w1"), ("wakeup", "w2")]
    dropped = events(t, name="InboundDropped")
    assert [h.data["reason"] for h in dropped] == ["session_reset"]
    assert len(dropped[0].data["item_ids"]) == 3
    agent = Agent()
    outcomes = drain(t, ALICE, agent)
    assert agent.items == [("wakeup", "w1"), ("wakeup", "w2")]
    assert outcomes[0].created_session is True  # the wake-ups run in the fresh session


# -- a crash never loses an accepted message ---------------------------------------------------

CHILD = """
from turnlog import SessionSource
src = SessionSource(platform="telegram", chat_id="42", user_id="42", user_name="alice")
t = kit.turnlog(owner="doomed-gateway")
plan = [("human", "h1"), ("human", "h2"), ("queued", "q1"), ("queued", "q2"), ("wakeup", "w1"),
        ("wakeup", "w2"), ("human", "h3"), ("queued", "q3")]
ids = []
for kind, text in plan:
    ids.append(t.accept(src, text, kind=kind).item_id)
kit.ready(item_ids=ids)
kit.hang()
"""


def test_a_crash_never_loses_an_accepted_message(tmp_path, db):
    info = procs.crash(db, CHILD, work=tmp_path).data

    with Turnlog(db, owner="restarted-gateway") as fresh:
        rows = fresh.queue(ALICE)
        assert [(r.kind, r.text, r.state) for r in rows] == [
            ("human", "h1\nh2", "pending"), ("queued", "q1", "pending"), ("queued", "q2", "pending"),
            ("wakeup", "w1\nw2", "pending"), ("human", "h3", "pending"), ("queued", "q3", "pending")]
        assert sorted({r.item_id for r in rows}) == sorted(set(info["item_ids"]))
        # and they are served, in order, by the new process
        agent = Agent()
        drain(fresh, ALICE, agent)
        assert [text for _, text in agent.items] == ["h1\nh2", "q1", "q2", "w1\nw2", "h3", "q3"]
        assert fresh.queue(ALICE) == []
