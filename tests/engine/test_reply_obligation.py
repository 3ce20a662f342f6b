"""One rule for what a reply owes (commands/turn.py): the gateway's turn path and
`Turnlog.record_reply` (a gateway running its own loop) record the same delivery for the same reply."""

from __future__ import annotations

import pytest

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.domain.inbox import WAKEUP
from turnlog.domain.silence import SILENCE_NOTICE

ALICE_IN_GROUP = SessionSource(platform="telegram", chat_type="group", chat_id="-100", thread_id="7", user_id="alice",
                      message_id="m1")
SAME_FIELDS = ("session_id", "seq", "session_key", "platform", "chat_id", "thread_id", "content")


def engine(path) -> Turnlog:
    return Turnlog(str(path), clock=ManualClock(), session_ids=SequentialIds(), owner="gateway")


def by_the_turn_path(tmp_path, reply: str, *, kind: str = "human") -> list[dict]:
    t = engine(tmp_path / "turn.db")
    t.accept(ALICE_IN_GROUP, "hello", kind=kind)
    t.run_next(ALICE_IN_GROUP, lambda history, item: reply, lambda text: None)
    return t.ledger()


def by_record_reply(tmp_path, reply: str, *, internal: bool = False, reply_to=ALICE_IN_GROUP) -> list[dict]:
    t = engine(tmp_path / "api.db")
    route = t.get_or_create_session(ALICE_IN_GROUP)
    token = t.turns.acquire_lease(route.session_id, route.session_key, timeout=5)
    t.turns.append_message(token, "user", "hello")
    t.turns.record_reply(token, reply, reply_to=reply_to, internal=internal, inbound_message_id="m1")
    return t.ledger()


@pytest.mark.parametrize("reply", ["the answer", "NO_REPLY"])
def test_a_reply_owes_the_same_delivery_either_way(tmp_path, reply):
    turn = by_the_turn_path(tmp_path, reply)
    api = by_record_reply(tmp_path, reply)
    assert len(turn) == len(api) == 1
    assert {f: getattr(turn[0], f) for f in SAME_FIELDS} == {f: getattr(api[0], f) for f in SAME_FIELDS}
    assert turn[0].content == ("the answer" if reply == "the answer" else SILENCE_NOTICE)
    assert (turn[0].platform, turn[0].chat_id, turn[0].thread_id) == ("telegram", "-100", "7")


def test_silence_on_an_internal_turn_owes_nothing_either_way(tmp_path):
    assert by_the_turn_path(tmp_path, "NO_REPLY", kind=WAKEUP) == []
    assert by_record_reply(tmp_path, "NO_REPLY", internal=True) == []


def test_without_reply_to_the_reply_goes_back_to_the_sessions_origin(tmp_path):
    [row] = by_record_reply(tmp_path, "the answer", reply_to=None)
    assert (row.platform, row.chat_id, row.thread_id) == ("telegram", "-100", "7")
