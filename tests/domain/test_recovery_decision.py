"""The pure recovery rules of domain/recovery.py, alone: every interrupted-turn case, and the one
completion rule both a finished turn and recovery apply."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from turnlog.domain.recovery import (DROPPED, NOTHING_OWED, REDELIVER, RESUME_PENDING, STUCK_LOOP_LIMIT,
                                     SUSPENDED_STUCK_LOOP, UNOWNED_ROW, InterruptedFacts, answered_items,
                                     closes_in_flight_items, decide_interrupted_turn, finishes_the_turn)

NO_REPLY = InterruptedFacts(has_reply=False, delivery_recorded=False, reply_owes_outbound=False, session_open=True,
                            session_suspended=False, interrupted_before=0)
REPLIED = replace(NO_REPLY, has_reply=True, reply_owes_outbound=True)


@pytest.mark.parametrize("facts,action", [
    (replace(REPLIED, delivery_recorded=True), REDELIVER),
    (REPLIED, UNOWNED_ROW),
    (replace(REPLIED, reply_owes_outbound=False), NOTHING_OWED),
    (replace(REPLIED, session_open=False, interrupted_before=5), UNOWNED_ROW),  # a reply stands regardless
    (NO_REPLY, RESUME_PENDING),
    (replace(NO_REPLY, interrupted_before=STUCK_LOOP_LIMIT - 2), RESUME_PENDING),
    (replace(NO_REPLY, interrupted_before=STUCK_LOOP_LIMIT - 1), SUSPENDED_STUCK_LOOP),
    (replace(NO_REPLY, session_suspended=True), SUSPENDED_STUCK_LOOP),
    (replace(NO_REPLY, session_open=False, interrupted_before=STUCK_LOOP_LIMIT), DROPPED),
], ids=["owed", "unowned", "silent", "reply-on-ended", "first", "second", "third", "suspended", "ended"])
def test_each_interrupted_turn_gets_one_action(facts, action):
    assert decide_interrupted_turn(facts) == action
    assert finishes_the_turn(action) == facts.has_reply
    assert closes_in_flight_items(action) == (action in (DROPPED, SUSPENDED_STUCK_LOOP))


@dataclass
class Item:
    item_id: str
    session_id: str | None


def test_a_finished_turn_answers_its_item_and_after_an_interruption_the_earlier_ones():
    waiting = [Item("1", "s1"), Item("2", "s1"), Item("3", "s2")]
    assert answered_items(waiting, "2", "s1", closes_cut_off=False) == [("2", "answered")]
    assert answered_items(waiting, "2", "s1", closes_cut_off=True) == [("1", "answered_by_later_turn"),
                                                                ("2", "answered")]
    assert answered_items(waiting, None, "s1", closes_cut_off=True) == [("1", "answered_by_later_turn"),
                                                                 ("2", "answered_by_later_turn")]
    assert answered_items(waiting, None, "s1", closes_cut_off=False) == []
