"""A turn's write transactions (issue 14 item 4: fewer transactions a turn).

On an idle key a message's turn starts in the transaction that accepts and routes it: accept +
route + lease + user message commit together, so a turn is three transactions (that one, the reply
with its delivery obligation, the settlement with the release). On a busy key the message is
still durable before the wait for the lease, exactly as before.
"""

import pytest

from turnlog import LeaseTimeout, SessionSource

from chat import ALICE


class Transactions:
    """The batches of events the store's recorder is asked to write, decoded (one per transaction)."""

    def __init__(self, engine):
        self.batches = []
        recorder = engine._app.recorder
        mapper = engine._app.mapper
        insert = recorder.insert_events

        def spy(stored_events, **kwargs):
            result = insert(stored_events, **kwargs)
            self.batches.append([type(mapper.to_domain_event(s)).__qualname__ for s in stored_events])
            return result

        recorder.insert_events = spy


def reply(history, item):
    return f"re: {item.text}"


@pytest.mark.parametrize("turn_number", [1, 2])
def test_a_turn_on_an_idle_key_is_three_transactions_the_first_starting_it(t, turn_number):
    if turn_number == 2:
        t.handle_message(ALICE, "first", reply, lambda text: None)  # the session and lease exist already
    spied = Transactions(t)
    sent = []
    outcomes = t.handle_message(ALICE, "hello", reply, sent.append)
    assert sent == ["re: hello"] and len(outcomes) == 1
    assert len(spied.batches) == 3, spied.batches
    first = spied.batches[0]
    # accepted, routed, leased and started with its user message: all or nothing; the accept
    # carries the start (one inbox event), after the lease's acquisition
    for name in ("Inbox.Accepted", "TurnLease.Acquired", "MessageAppended"):
        assert name in first, (name, first)
    assert "Inbox.Started" not in first, first
    assert first.index("TurnLease.Acquired") < first.index("Inbox.Accepted") < first.index("MessageAppended")
    # the acquisition reserves the user message's seq: no renewal beside it
    assert "TurnLease.Renewed" not in first, first
    assert spied.batches[1] == ["TurnLease.Renewed", "MessageAppended", "Delivery.Created"]
    assert spied.batches[2] == ["Delivery.Delivered", "TurnLease.Released", "Inbox.Completed"]


def test_on_a_busy_key_the_message_is_durable_before_the_wait_for_the_lease(t, other):
    session_id = t.handle_message(ALICE, "first", reply, lambda text: None)[0].session_id
    token = other.turns.acquire_lease(session_id, "elsewhere")
    spied = Transactions(t)
    with pytest.raises(LeaseTimeout):
        t.handle_message(ALICE, "while busy", reply, lambda text: None, timeout=0)
    # one transaction: the accept (and routing), nothing of a turn
    assert len(spied.batches) == 1
    assert "Inbox.Accepted" in spied.batches[0] and "TurnLease.Acquired" not in spied.batches[0]
    assert [(q.text, q.state) for q in other.queue(ALICE)] == [("while busy", "pending")]

    other.turns.release_lease(token)
    sent = []
    outcome = t.run_next(ALICE, reply, sent.append)
    assert outcome is not None and sent == ["re: while busy"]


# Every event a turn writes, transaction by transaction (issue 14: fewer events a turn, each one
# still meaning something). A new event kind on the turn path must be added here on purpose.
FIRST_TURN = [
    # the route is registered already bound to its first session (no Route.Bound beside it)
    ["Session.Created", "Route.Created", "TurnLease.Created", "TurnLease.Acquired", "Inbox.Created",
     "Inbox.Accepted", "MessageAppended", "MessageSeen.Created"],
    ["TurnLease.Renewed", "MessageAppended", "Delivery.Created"],
    ["Delivery.Delivered", "TurnLease.Released", "Inbox.Completed"],
]
LATER_TURN = [
    ["Session.ActivityTouched", "TurnLease.Acquired", "Inbox.Accepted", "MessageAppended", "MessageSeen.Created"],
    FIRST_TURN[1],
    FIRST_TURN[2],
]


def test_the_events_of_a_first_and_a_later_turn(t):
    for n, expected in enumerate([FIRST_TURN, LATER_TURN, LATER_TURN]):
        spied = Transactions(t)
        source = SessionSource(platform="telegram", chat_id="42", user_id="42", message_id=f"m{n}")
        outcome, = t.handle_message(source, f"hello {n}", reply, lambda text: None)
        assert spied.batches == expected, (n, spied.batches)
        # the user message took the seq its lease's acquisition reserved; the reply the next one
        assert (outcome.user_seq, outcome.reply_seq) == (2 * n + 1, 2 * n + 2)
    assert len(t.history(source)) == sum(map(len, FIRST_TURN)) + 2 * sum(map(len, LATER_TURN))


def test_a_turn_that_waited_for_the_lease_reserves_its_seq_with_the_acquisition(t, other):
    session_id = t.handle_message(ALICE, "first", reply, lambda text: None)[0].session_id  # seqs 1, 2
    token = other.turns.acquire_lease(session_id, "elsewhere")  # a bare acquisition reserves nothing
    assert other.turns.append_message(token, "user", "from elsewhere").seq == 3  # fenced by a renewal
    with pytest.raises(LeaseTimeout):
        t.handle_message(ALICE, "while busy", reply, lambda text: None, timeout=0)
    other.turns.release_lease(token)

    spied = Transactions(t)
    outcome = t.run_next(ALICE, reply, lambda text: None)
    assert (outcome.user_seq, outcome.reply_seq) == (4, 5)
    # routed, leased and started in one transaction, as on an idle key
    assert spied.batches == [["Session.ActivityTouched", "TurnLease.Acquired", "Inbox.Started", "MessageAppended"],
                             FIRST_TURN[1], FIRST_TURN[2]], spied.batches
    assert [m["seq"] for m in t.transcript(session_id)] == [1, 2, 3, 4, 5]


class Reads:
    """How many times the store's recorder is asked for a stream's events."""

    def __init__(self, engine):
        self.count = 0
        recorder = engine._app.recorder
        select = recorder.select_events

        def spy(*args, **kwargs):
            self.count += 1
            return select(*args, **kwargs)

        recorder.select_events = spy


def test_the_reads_of_a_first_and_a_later_turn(t):
    """A key's first turn looks up its route and inbox (one query each: neither exists yet, and no
    snapshot is looked for); the new session's lease is not looked up. A turn finishes from this
    process's copy of its session (another process that marks or ends it revokes the lease in the
    same write, which the release's save then loses to), so a later turn reads nothing."""
    reads = []
    for n in range(3):
        spied = Reads(t)
        source = SessionSource(platform="telegram", chat_id="42", user_id="42", message_id=f"m{n}")
        t.handle_message(source, f"hello {n}", reply, lambda text: None)
        reads.append(spied.count)
    assert reads == [2, 0, 0]


def test_many_keys_keep_their_streams_cached_without_their_finished_deliveries(t):
    """A turn's delivery and its message id's first sighting never change once the turn is done, so
    they do not take the cache's room: after many keys' turns a key's next turn reads nothing from the log."""
    t._ctx.cache.size = 4 * 20 + 10  # room for 20 keys' route, session, inbox and lease, not for 2 more a turn
    sources = [SessionSource(platform="telegram", chat_id=str(k), user_id=str(k)) for k in range(20)]
    for n in range(3):
        for k, source in enumerate(sources):
            source.message_id = f"m{n}-{k}"
            t.handle_message(source, "hi", reply, lambda text: None)
    spied = Reads(t)
    sources[0].message_id = "last"
    t.handle_message(sources[0], "hi", reply, lambda text: None)
    assert spied.count == 0
