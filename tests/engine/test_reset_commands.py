"""Acceptance: /new, /reset and /resume (docs/behaviour.md §4, §9), silence markers (§6.3) and the delivery ledger (§6.2)."""

import uuid

import pytest

from turnlog import (InvalidRequest, SessionSource, StaleLease)

from chat import ALICE, echo, reply_with

RECOVERED_PREFIX = "♻️ Recovered reply — the gateway restarted during delivery, so this may be a duplicate:\n\n"
SILENCE_NOTICE = "The agent returned only a silence marker, so there is no reply to this message."


class Outbox:
    def __init__(self):
        self.sent = []

    def __call__(self, text):
        self.sent.append(text)


def route_of(t, source=ALICE):
    key = t.routing_key(source)
    return next(r for r in t.routes() if r.session_key == key)


def named(t, key_or_session, event):
    return [h for h in t.history(key_or_session) if h.event == event]


def turn(t, text, source=ALICE, responder=echo, outbox=None):
    outcomes = t.handle_message(source, text, responder, outbox or Outbox())
    assert len(outcomes) == 1
    return outcomes[0]


# -- /new and /reset -------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["/new", "/reset"])
def test_reset_invalidates_the_running_turn_and_starts_over(t, other, command):
    first = turn(t, "hello")
    old = first.session_id
    # a turn is running in gateway A when gateway B gets the command
    running = t.turns.acquire_lease(old, first.session_key, timeout=0.1)
    t.turns.append_message(running, "user", "a question")
    t.accept(ALICE, "queued follow-up")
    t.command(ALICE, "/queue queued item")

    result = other.command(ALICE, command)
    assert result.command == command
    assert result.changed is True
    assert result.session_id == old

    # generation over: the running turn's late writes are refused
    history_before = [(h.position, h.event) for h in t.history(old)]
    with pytest.raises(StaleLease):
        t.turns.append_message(running, "assistant", "late answer")
    assert [(h.position, h.event) for h in t.history(old)] == history_before
    # lease released (revoked) and recorded
    assert t.turns.holder(old) is None
    assert [h.data["reason"] for h in named(t, old, "LeaseRevoked")] == ["session_reset"]
    assert t.turns.release_lease(running) is False
    # conversation scope cleared, children interrupted (none were running here)
    cleared = named(t, old, "ConversationScopeCleared")
    assert len(cleared) == 1
    assert cleared[0].data["interrupted_children"] == []
    assert cleared[0].actor == "telegram:user:42"
    assert cleared[0].cause == f"command:{command}"
    # queued human and /queue messages dropped
    assert t.queue(ALICE) == []
    assert [h.data["reason"] for h in named(t, ALICE, "InboundDropped")] == ["session_reset"]
    # the route is detached, the old session ended, its transcript kept
    assert route_of(t).session_id is None
    assert route_of(t).bound_reason == "session_reset"
    ended = next(s for s in t.sessions() if s.session_id == old)
    assert ended.end_reason == "session_reset"
    assert ended.routed is False
    assert [(m["role"], m["content"]) for m in t.transcript(old)] == [
        ("user", "hello"), ("assistant", "re: hello"), ("user", "a question")]

    # the next message gets a fresh session
    after = turn(t, "fresh start")
    assert after.session_id != old
    assert after.created_session is True
    assert after.reason == "route_detached"
    assert route_of(t).session_id == after.session_id
    assert [m["content"] for m in t.transcript(after.session_id)] == ["fresh start", "re: fresh start"]
    assert [m["content"] for m in t.transcript(old)] == ["hello", "re: hello", "a question"]


def test_reset_of_an_idle_session_needs_no_lease(t):
    first = turn(t, "hello")
    assert t.command(ALICE, "/new").changed is True
    assert not named(t, first.session_id, "LeaseRevoked")
    assert named(t, first.session_id, "ConversationScopeCleared")
    assert route_of(t).session_id is None


def test_reset_on_a_key_never_routed_changes_nothing(t):
    result = t.command(ALICE, "/reset")
    assert result.changed is False
    assert t.routes() == []
    assert t.sessions() == []


@pytest.mark.parametrize("platform,expects_notice", [
    ("telegram", True), ("discord", True), ("api_server", False), ("webhook", False)])
def test_reset_notice_depends_on_the_platform(t, platform, expects_notice):
    source = SessionSource(platform=platform, chat_id="c1", user_id="u1")
    turn(t, "hello", source)
    for command in ("/new", "/reset"):
        reply = t.command(source, command).reply
        if expects_notice:
            assert reply is not None and "/resume" in reply and "Session reset" in reply
        else:
            assert reply is None
        turn(t, "again", source)


# -- /resume -----------------------------------------------------------------------------------


def test_resume_switches_the_key_back_to_the_old_session(t):
    old = turn(t, "first conversation").session_id
    t.command(ALICE, "/new")
    new = turn(t, "second conversation").session_id
    assert new != old

    result = t.command(ALICE, f"/resume {old}")
    assert result.reply == f"Resumed session {old}."
    assert result.session_id == old
    assert result.changed is True
    assert route_of(t).session_id == old

    back = turn(t, "back again")
    assert back.session_id == old
    assert back.created_session is False
    assert [m["content"] for m in t.transcript(old)] == [
        "first conversation", "re: first conversation", "back again", "re: back again"]
    assert [m["content"] for m in t.transcript(new)] == ["second conversation", "re: second conversation"]

    reopened = named(t, old, "SessionReopened")
    assert len(reopened) == 1
    rebound = [h for h in named(t, ALICE, "RouteBound") if h.data["reason"] == "session_switch"]
    assert [(h.data["session_id"], h.data["previous_session_id"]) for h in rebound] == [(old, new)]
    assert next(s for s in t.sessions() if s.session_id == new).end_reason == "session_switch"
    assert next(s for s in t.sessions() if s.session_id == old).end_reason is None


def test_resume_unknown_session_replies_and_changes_nothing(t):
    turn(t, "hello")
    routes_before, sessions_before = t.routes(), t.sessions()
    history_before = [(h.position, h.event) for h in t.history(ALICE)]
    result = t.command(ALICE, "/resume 20990101_000000_deadbeef")
    assert result.reply == "No session 20990101_000000_deadbeef."
    assert result.changed is False
    assert t.routes() == routes_before
    assert t.sessions() == sessions_before
    assert [(h.position, h.event) for h in t.history(ALICE)] == history_before


def test_resume_unknown_session_on_a_key_never_routed_changes_nothing(t):
    result = t.command(ALICE, "/resume nope")
    assert result.reply == "No session nope."
    assert result.changed is False
    assert t.routes() == []
    assert t.sessions() == []


def test_resume_without_an_id_shows_usage(t):
    turn(t, "hello")
    result = t.command(ALICE, "/resume")
    assert result.changed is False
    assert result.reply.startswith("Usage: /resume")


# -- silence markers ---------------------------------------------------------------------------


def test_silent_human_turn_delivers_the_silence_notice(t):
    outbox = Outbox()
    outcome = turn(t, "are you there?", responder=reply_with("[SILENT]"), outbox=outbox)
    assert outbox.sent == [SILENCE_NOTICE]
    assert outcome.delivery_state == "delivered"
    # the assistant row keeps the marker (alternation kept); the ledger holds what was sent
    assert [(m["role"], m["content"]) for m in t.transcript(outcome.session_id)] == [
        ("user", "are you there?"), ("assistant", "[SILENT]")]
    rows = [r for r in t.ledger() if r.session_id == outcome.session_id]
    assert [(r.seq, r.content, r.state) for r in rows] == [(outcome.reply_seq, SILENCE_NOTICE, "delivered")]


def test_silent_wakeup_turn_owes_no_delivery(t):
    sid = turn(t, "hello").session_id
    t.accept(ALICE, "background job done", kind="wakeup")
    outbox = Outbox()
    outcome = t.run_next(ALICE, reply_with("NO_REPLY"), outbox)
    assert outcome.session_id == sid
    assert outcome.delivery_state is None
    assert outbox.sent == []
    assert [r.seq for r in t.ledger() if r.session_id == sid] == [2]  # only the human turn's reply
    assert t.transcript(sid)[-1]["content"] == "NO_REPLY"
    assert not [h for h in t.history(sid) if h.event == "DeliveryRecorded" and h.data["seq"] == outcome.reply_seq]
    assert t.queue(ALICE) == []
    assert t.turns.holder(sid) is None


def test_wakeup_turn_with_a_real_reply_is_delivered(t):
    turn(t, "hello")
    t.accept(ALICE, "reminder", kind="wakeup")
    outbox = Outbox()
    outcome = t.run_next(ALICE, reply_with("Your reminder: stretch"), outbox)
    assert outbox.sent == ["Your reminder: stretch"]
    assert outcome.delivery_state == "delivered"


def test_record_reply_silence_on_an_internal_turn_returns_no_delivery(t):
    r = t.get_or_create_session(ALICE)
    tok = t.turns.acquire_lease(r.session_id, r.session_key, timeout=0.1)
    t.turns.append_message(tok, "user", "internal poke")
    msg, delivery = t.turns.record_reply(tok, "[SILENT]", reply_to=ALICE, internal=True)
    assert delivery is None
    assert msg.role == "assistant"
    msg, delivery = t.turns.record_reply(tok, "[SILENT]", reply_to=ALICE)
    assert delivery is not None
    assert [r.content for r in t.ledger()] == [SILENCE_NOTICE]


# -- delivery ledger ---------------------------------------------------------------------------


def _reply_owing_delivery(t, text="the answer", source=ALICE):
    r = t.get_or_create_session(source)
    tok = t.turns.acquire_lease(r.session_id, r.session_key, timeout=0.1)
    t.turns.append_message(tok, "user", "question")
    msg, delivery_id = t.turns.record_reply(tok, text, reply_to=source)
    t.turns.release_lease(tok)
    return r.session_id, msg, delivery_id


def _row(t, delivery_id):
    return next(r for r in t.ledger() if r.delivery_id == str(delivery_id))


def test_delivery_goes_pending_attempting_delivered(t):
    sid, msg, did = _reply_owing_delivery(t)
    row = _row(t, did)
    assert (row.state, row.attempts, row.owner) == ("pending", 0, None)
    assert (row.session_id, row.seq, row.platform, row.chat_id) == (sid, msg.seq, "telegram", "42")
    assert [r.delivery_id for r in t.ledger("pending")] == [str(did)]

    attempt = t.turns.attempt_delivery(did)
    assert attempt.attempt == 1
    assert attempt.text == "the answer"
    row = _row(t, did)
    assert (row.state, row.attempts, row.owner, row.recovered) == ("attempting", 1, "gateway-a", False)

    assert t.turns.settle_delivery(did) == "delivered"
    row = _row(t, did)
    assert (row.state, row.attempts, row.last_error) == ("delivered", 1, None)
    assert t.ledger("pending") == []
    assert [r.delivery_id for r in t.ledger("delivered")] == [str(did)]
    # delivered is final
    with pytest.raises(InvalidRequest, match="delivered"):
        t.turns.attempt_delivery(did)


def test_settling_a_delivery_that_is_not_being_attempted_is_refused(t):
    _, _, did = _reply_owing_delivery(t)
    with pytest.raises(InvalidRequest, match="not attempting"):
        t.turns.settle_delivery(did)
    assert _row(t, did).state == "pending"


def test_failed_send_is_retried_with_the_recovered_prefix(t):
    _, _, did = _reply_owing_delivery(t)

    def broken(text):
        raise ConnectionError("telegram is down")

    assert t.turns.deliver(did, broken) == "failed"
    row = _row(t, did)
    assert (row.state, row.attempts) == ("failed", 1)
    assert "ConnectionError" in row.last_error and "telegram is down" in row.last_error

    attempt = t.turns.attempt_delivery(did)
    assert attempt.attempt == 2
    assert attempt.text == RECOVERED_PREFIX + "the answer"
    row = _row(t, did)
    assert (row.state, row.attempts, row.recovered) == ("attempting", 2, True)
    assert t.turns.settle_delivery(did) == "delivered"
    assert _row(t, did).state == "delivered"


def test_retry_through_deliver_sends_the_prefixed_text(t):
    _, _, did = _reply_owing_delivery(t)
    assert t.turns.deliver(did, lambda text: (_ for _ in ()).throw(ConnectionRefusedError("down"))) == "failed"
    outbox = Outbox()
    assert t.turns.deliver(did, outbox) == "delivered"
    assert outbox.sent == [RECOVERED_PREFIX + "the answer"]


def test_at_most_three_attempts_then_dead_lettered(t):
    _, _, did = _reply_owing_delivery(t)
    for n in (1, 2, 3):
        assert t.turns.attempt_delivery(did).attempt == n
        state = t.turns.settle_delivery(did, error=f"failure {n}")
        assert state == ("failed" if n < 3 else "dead")
    row = _row(t, did)
    assert (row.state, row.attempts) == ("dead", 3)
    assert [r.delivery_id for r in t.ledger("dead")] == [str(did)]
    with pytest.raises(InvalidRequest) as err:
        t.turns.attempt_delivery(did)
    assert "dead" in str(err.value) and "turnlog ledger retry" in str(err.value)
    assert _row(t, did).attempts == 3


def test_ledger_is_keyed_on_the_session_not_the_routing_key(t):
    old = turn(t, "before reset")
    t.command(ALICE, "/new")
    new = turn(t, "after reset")
    assert new.session_id != old.session_id
    rows = {(r.session_id, r.seq): r for r in t.ledger()}
    assert set(rows) == {(old.session_id, old.reply_seq), (new.session_id, new.reply_seq)}
    assert rows[(old.session_id, old.reply_seq)].content == "re: before reset"
    assert rows[(new.session_id, new.reply_seq)].content == "re: after reset"
    # both rows carry the same routing key; a retry of the old one still names the old session
    assert {r.session_key for r in rows.values()} == {t.routing_key(ALICE)}


def test_old_delivery_retried_after_new_stays_with_its_session(t):
    def broken(text):
        raise ConnectionError("down")

    old = turn(t, "before reset", outbox=broken)
    assert old.delivery_state == "failed"
    t.command(ALICE, "/new")
    turn(t, "after reset")
    row = next(r for r in t.ledger("failed"))
    assert row.session_id == old.session_id
    attempt = t.turns.attempt_delivery(uuid.UUID(row.delivery_id))
    assert attempt.text == RECOVERED_PREFIX + "re: before reset"
    t.turns.settle_delivery(attempt.delivery_id)
    assert _row(t, attempt.delivery_id).session_id == old.session_id
