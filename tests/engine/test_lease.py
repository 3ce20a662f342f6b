"""Acceptance: the cross-process turn lease (docs/behaviour.md §5) and the fencing of transcript writes.

Two `Turnlog` objects opened on one file act as two processes: each has its own owner id.
"""

import dataclasses
import threading

import pytest

from turnlog import EngineConfig, LeaseTimeout, ManualClock, SequentialIds, SessionSource, StaleLease, Turnlog

from chat import ALICE

TTL = 30.0
BOB_GROUP = SessionSource(platform="telegram", chat_type="group", chat_id="-100", user_id="7")


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def engines(make_turnlog):
    """Two engines on one file (two 'processes') sharing one manual clock."""
    config = EngineConfig(lease_ttl_s=TTL, lease_timeout_s=0.05)
    ids = SequentialIds()
    return (make_turnlog(session_ids=ids, config=config, owner="gateway-a"),
            make_turnlog(session_ids=ids, config=config, owner="gateway-b"))


def _session(t, source=ALICE):
    r = t.get_or_create_session(source)
    return r.session_id, r.session_key


def _events(t, session_id):
    return [(h.position, h.event) for h in t.history(session_id)]


def _lease_acquisitions(t, session_id):
    return [h for h in t.history(session_id) if h.event == "LeaseAcquired"]


# -- epochs ------------------------------------------------------------------------------------


def test_epochs_strictly_increase_per_session_whoever_acquires(engines, clock):
    a, b = engines
    sid, key = _session(a)
    other_sid, other_key = _session(a, BOB_GROUP)
    epochs = []
    for t in (a, b, a, a, b):
        tok = t.turns.acquire_lease(sid, key, timeout=0.05)
        epochs.append(tok.epoch)
        assert t.turns.release_lease(tok) is True
    # a revocation (/stop) and a takeover after expiry each end an epoch too
    tok = a.turns.acquire_lease(sid, key, timeout=0.05)
    epochs.append(tok.epoch)
    assert b.command(ALICE, "/stop").reply == "Stopped."
    tok = b.turns.acquire_lease(sid, key, timeout=0.05)
    epochs.append(tok.epoch)
    clock.advance(TTL + 1)
    epochs.append(a.turns.acquire_lease(sid, key, timeout=0.05).epoch)

    assert epochs == list(range(1, len(epochs) + 1))
    assert [h.data["epoch"] for h in _lease_acquisitions(a, sid)] == epochs
    # epochs are per session: another session starts at 1
    assert a.turns.acquire_lease(other_sid, other_key, timeout=0.05).epoch == 1


# -- holding, waiting, releasing ---------------------------------------------------------------


def test_lease_holder_reports_the_holder_and_none_when_free(engines, clock):
    a, b = engines
    sid, key = _session(a)
    assert a.turns.holder(sid) is None
    tok = a.turns.acquire_lease(sid, key, timeout=0.05)
    for t in (a, b):  # the other "process" sees the same holder
        holder = t.turns.holder(sid)
        assert holder.owner == "gateway-a"
        assert holder.owner_key == key
        assert holder.epoch == tok.epoch
        assert holder.turn_id == tok.turn_id
        assert holder.expired is False
    clock.advance(TTL + 1)
    assert b.turns.holder(sid).expired is True
    a.turns.release_lease(tok)
    assert a.turns.holder(sid) is None
    assert b.turns.holder(sid) is None


def test_second_owner_times_out_naming_the_holder(engines):
    a, b = engines
    sid, key = _session(a)
    tok = a.turns.acquire_lease(sid, key, timeout=0.05)
    with pytest.raises(LeaseTimeout) as err:
        b.turns.acquire_lease(sid, "agent:main:telegram:group:-100:7", timeout=0.05)
    message = str(err.value)
    assert "gateway-a" in message
    assert key in message
    assert sid in message
    # the failed wait changed nothing
    assert a.turns.holder(sid).epoch == tok.epoch
    assert [h.data["owner"] for h in _lease_acquisitions(a, sid)] == ["gateway-a"]


def test_same_owner_cannot_take_its_own_held_lease_twice(engines):
    a, _ = engines
    sid, key = _session(a)
    a.turns.acquire_lease(sid, key, timeout=0.05)
    with pytest.raises(LeaseTimeout):
        a.turns.acquire_lease(sid, key, timeout=0.05)


def test_waiter_gets_the_lease_after_release(engines):
    a, b = engines
    sid, key = _session(a)
    tok = a.turns.acquire_lease(sid, key, timeout=0.05)
    started = threading.Event()
    got = {}

    def wait_for_it():
        started.set()
        try:
            got["token"] = b.turns.acquire_lease(sid, key, timeout=30.0)
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            got["error"] = e

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    started.wait(5)
    threading.Event().wait(0.1)  # let the waiter poll against the held lease at least once
    assert waiter.is_alive(), got  # it is waiting, not done
    assert a.turns.release_lease(tok) is True
    waiter.join(30)
    assert not waiter.is_alive()
    assert "error" not in got, got
    assert got["token"].epoch == tok.epoch + 1
    assert got["token"].owner == "gateway-b"
    assert a.turns.holder(sid).owner == "gateway-b"
    # a clean hand-over is not a takeover
    assert _lease_acquisitions(a, sid)[-1].data["taken_over_from"] is None


def test_release_is_idempotent_true_once_then_false(engines):
    a, b = engines
    sid, key = _session(a)
    tok = a.turns.acquire_lease(sid, key, timeout=0.05)
    assert a.turns.release_lease(tok) is True
    assert a.turns.release_lease(tok) is False
    assert b.turns.release_lease(tok) is False
    releases = [h for h in a.history(sid) if h.event == "LeaseReleased"]
    assert len(releases) == 1
    assert releases[0].data["epoch"] == tok.epoch


def test_only_the_holder_releases_a_stale_token_cannot_free_a_newer_turn(engines):
    a, b = engines
    sid, key = _session(a)
    old = a.turns.acquire_lease(sid, key, timeout=0.05)
    assert a.turns.release_lease(old) is True
    newer = b.turns.acquire_lease(sid, key, timeout=0.05)
    before = _events(a, sid)
    # the stale unwind of the old turn, from its own process and from the new holder's
    assert a.turns.release_lease(old) is False
    assert b.turns.release_lease(old) is False
    assert a.turns.holder(sid).epoch == newer.epoch
    assert a.turns.holder(sid).owner == "gateway-b"
    assert _events(a, sid) == before
    # a token for an epoch that never existed releases nothing either
    assert a.turns.release_lease(dataclasses.replace(newer, epoch=newer.epoch + 5)) is False
    assert b.turns.release_lease(newer) is True


def test_release_after_revocation_returns_false(engines):
    a, b = engines
    sid, key = _session(a)
    tok = a.turns.acquire_lease(sid, key, timeout=0.05)
    b.command(ALICE, "/stop")
    assert a.turns.release_lease(tok) is False
    assert not [h for h in a.history(sid) if h.event == "LeaseReleased"]


# -- fencing: a stale-epoch write is refused and leaves no event ------------------------------


def _assert_refused_without_trace(writer, reader, tok, session_id):
    transcript_before = reader.transcript(session_id)
    history_before = _events(reader, session_id)
    with pytest.raises(StaleLease):
        writer.turns.append_message(tok, "assistant", "late reply from a stale turn")
    with pytest.raises(StaleLease):
        writer.turns.record_reply(tok, "late reply with a delivery", reply_to=ALICE)
    with pytest.raises(StaleLease):
        writer.turns.renew_lease(tok)
    assert reader.transcript(session_id) == transcript_before
    assert writer.transcript(session_id) == transcript_before
    assert _events(reader, session_id) == history_before
    assert [r for r in reader.ledger() if r.content.startswith("late reply")] == []


def test_stale_write_after_new_from_another_instance_is_refused(engines):
    a, b = engines
    sid, key = _session(a)
    tok = a.turns.acquire_lease(sid, key, timeout=0.05)
    a.turns.append_message(tok, "user", "hello")
    assert b.command(ALICE, "/new").changed is True
    assert a.turns.holder(sid) is None
    _assert_refused_without_trace(a, b, tok, sid)
    assert [m["content"] for m in a.transcript(sid)] == ["hello"]


def test_stale_write_after_takeover_past_ttl_is_refused(engines, clock):
    a, b = engines
    sid, key = _session(a)
    tok = a.turns.acquire_lease(sid, key, timeout=0.05)
    a.turns.append_message(tok, "user", "hello")
    clock.advance(TTL - 1)
    with pytest.raises(LeaseTimeout):  # not expired yet
        b.turns.acquire_lease(sid, key, timeout=0.05)
    clock.advance(2)
    taker = b.turns.acquire_lease(sid, key, timeout=0.05)
    assert taker.epoch == tok.epoch + 1
    assert _lease_acquisitions(a, sid)[-1].data["taken_over_from"] == "gateway-a"
    _assert_refused_without_trace(a, b, tok, sid)
    # the new holder writes normally, after the old turn's messages
    rec = b.turns.append_message(taker, "user", "next turn")
    assert rec.seq == 2
    assert [(m["content"], m["epoch"]) for m in b.transcript(sid)] == [("hello", 1), ("next turn", 2)]


def test_stale_write_after_release_is_refused(engines):
    a, b = engines
    sid, key = _session(a)
    tok = a.turns.acquire_lease(sid, key, timeout=0.05)
    a.turns.append_message(tok, "user", "hello")
    a.turns.record_reply(tok, "hi there", reply_to=ALICE)
    assert a.turns.release_lease(tok) is True
    _assert_refused_without_trace(a, b, tok, sid)
    # and still refused once somebody else holds the next epoch
    b.turns.acquire_lease(sid, key, timeout=0.05)
    _assert_refused_without_trace(a, b, tok, sid)


def test_holder_writes_are_recorded_with_their_epoch_and_turn(engines):
    a, _ = engines
    sid, key = _session(a)
    first = a.turns.acquire_lease(sid, key, timeout=0.05)
    a.turns.append_message(first, "user", "one")
    a.turns.record_reply(first, "two", reply_to=ALICE)
    a.turns.release_lease(first)
    second = a.turns.acquire_lease(sid, key, timeout=0.05)
    a.turns.append_message(second, "user", "three")
    assert [(m["seq"], m["epoch"], m["turn_id"]) for m in a.transcript(sid)] == [
        (1, first.epoch, first.turn_id), (2, first.epoch, first.turn_id), (3, second.epoch, second.turn_id)]


# -- renewal -----------------------------------------------------------------------------------


def test_renewing_holder_keeps_the_lease_past_the_original_ttl(engines, clock):
    a, b = engines
    sid, key = _session(a)
    tok = a.turns.acquire_lease(sid, key, timeout=0.05)
    for _ in range(3):
        clock.advance(TTL * 0.75)
        a.turns.renew_lease(tok)
    # now 2.25 TTLs after acquisition: without renewals anyone could take it
    assert clock.now() > tok.expires_at
    with pytest.raises(LeaseTimeout):
        b.turns.acquire_lease(sid, key, timeout=0.05)
    holder = b.turns.holder(sid)
    assert holder.owner == "gateway-a"
    assert holder.expired is False
    rec = a.turns.append_message(tok, "user", "still mine")
    assert rec.seq == 1
    # a transcript write renews too: it keeps the lease alive by itself
    clock.advance(TTL * 0.75)
    a.turns.append_message(tok, "assistant", "yes")
    clock.advance(TTL * 0.75)
    with pytest.raises(LeaseTimeout):
        b.turns.acquire_lease(sid, key, timeout=0.05)
    # once renewals stop, the lease expires and is taken over
    clock.advance(TTL)
    assert b.turns.acquire_lease(sid, key, timeout=0.05).epoch == tok.epoch + 1
