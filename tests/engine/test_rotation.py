"""Compression rotation (docs/behaviour.md §11): the conversation continues in a child session, lease moved."""

import pytest

from turnlog import StaleLease

from chat import alice


@pytest.fixture
def t(make_turnlog):
    return make_turnlog()


def test_hygiene_thresholds_need_four_messages_then_85_percent_of_the_context(t):
    r = t.get_or_create_session(alice())
    tok = t.turns.acquire_lease(r.session_id, r.session_key)
    for role in ("user", "assistant", "user"):
        t.turns.append_message(tok, role, "x")
    assert not t.turns.needs_compression(tok, prompt_tokens=999, context_length=1000)  # 3 messages
    t.turns.append_message(tok, "assistant", "x")
    assert not t.turns.needs_compression(tok, prompt_tokens=849, context_length=1000)
    assert t.turns.needs_compression(tok, prompt_tokens=850, context_length=1000)


def test_rotation_moves_route_and_lease_to_a_child_with_lineage_and_fences_the_parent(t):
    r = t.get_or_create_session(alice())
    tok = t.turns.acquire_lease(r.session_id, r.session_key)
    for role in ("user", "assistant", "user", "assistant"):
        t.turns.append_message(tok, role, role)

    child_tok = t.turns.rotate_session(tok, alice())

    assert child_tok.session_id != r.session_id and child_tok.turn_id == tok.turn_id
    child = t.session(child_tok.session_id)
    assert (child.parent_session_id, child.created_reason) == (r.session_id, "compression")
    assert t.session(r.session_id).end_reason == "compression"
    assert t.get_or_create_session(alice()).session_id == child_tok.session_id  # route re-pointed
    with pytest.raises(StaleLease):
        t.turns.append_message(tok, "assistant", "late write to the parent")
    assert len(t.transcript(r.session_id)) == 4  # the refused write left no event
    assert t.turns.append_message(child_tok, "system", "summary of the parent").seq == 1
    assert t.turns.holder(child_tok.session_id).epoch == child_tok.epoch
    assert t.turns.holder(r.session_id) is None
    assert t.turns.release_lease(child_tok) is True
    moved = [h for h in t.history(r.session_id) if h.event == "LeaseMoved"]
    assert moved and moved[0].data["to_session_id"] == child_tok.session_id
