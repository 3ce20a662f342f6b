"""A turn cut off by /stop or /new, or whose agent raises, must not wedge its routing key."""

import pytest

from turnlog import StaleLease

from chat import ALICE


@pytest.fixture
def engines(make_turnlog):
    return make_turnlog(owner="gateway-a"), make_turnlog(owner="gateway-b")


@pytest.mark.parametrize("command", ["/stop", "/new"])
def test_interrupted_turn_does_not_stay_in_the_queue_forever(engines, command):
    a, b = engines
    a.accept(ALICE, "long task")
    with pytest.raises(StaleLease):
        a.run_next(ALICE, lambda history, item: b.command(ALICE, command) and "late", lambda text: None)
    # The cut-off item is closed, not left 'started' for ever.
    assert a.queue(ALICE) == []


def test_responder_failure_releases_the_lease(engines):
    a, _ = engines
    a.accept(ALICE, "hello")

    def crashing_agent(history, item):
        raise RuntimeError("model API error")

    with pytest.raises(RuntimeError):
        a.run_next(ALICE, crashing_agent, lambda text: None)
    sid = a.routes()[0].session_id
    # Spec §5: the lease is released in the dispatch `finally`. Here it stays held until its TTL,
    # so the key's next message waits up to lease_ttl_s (30 s by default) for the lease.
    assert a.turns.holder(sid) is None
    assert a.queue(ALICE) == []
