"""Erase while another gateway runs on the same log: that gateway still holds the subject's data key
in memory, and what it accepts after the erase must not be sealed under the destroyed key (words
accepted, then unreadable by anyone). Its write is refused in its own transaction and made again
under the subject's new key (storage/erased_keys.py). Two `Turnlog` objects on one file act as
two processes: each has its own keys, caches and writer connection."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from turnlog import EngineConfig, SequentialIds, SessionSource, Turnlog
from turnlog.aio import AsyncTurnlog

from chat import alice, collect, echo

BEFORE = "damson weathervane 5512"
AFTER = "greengage lantern 8830"


@pytest.fixture
def gateways(make_turnlog):
    ids = SequentialIds()
    return make_turnlog(session_ids=ids, owner="gateway-a"), make_turnlog(session_ids=ids, owner="gateway-b")


def words(t: Turnlog, session_id: str) -> list[str]:
    return [m["content"] for m in t.transcript(session_id)]


def test_words_a_gateway_takes_after_another_erased_their_subject_are_kept(gateways, make_turnlog):
    a, b = gateways
    first = b.handle_message(alice("m1"), BEFORE, echo, collect([]))[0]  # b now holds the subject's key
    a.erase_subject("telegram:42", actor="operator", cause="erase request")

    sent: list[str] = []
    after = b.handle_message(alice("m2"), AFTER, echo, collect(sent))[0]

    reader = make_turnlog(owner="reader")  # nothing cached: reads what the log holds
    assert after.session_id != first.session_id and after.created_session
    assert words(reader, after.session_id) == [AFTER, f"re: {AFTER}"] == words(b, after.session_id)
    assert sent == [f"re: {AFTER}"]
    assert words(reader, first.session_id) == ["[erased]", "[erased]"] == words(b, first.session_id)
    assert reader.maintenance.verify_chain().breaks == []
    assert reader.maintenance.verify()["ok"]


def test_a_message_one_gateway_accepts_after_the_erase_keeps_its_words_for_the_gateway_that_runs_it(gateways,
                                                                                                     make_turnlog):
    a, b = gateways
    b.handle_message(alice("m1"), BEFORE, echo, collect([]))
    a.erase_subject("telegram:42", actor="operator", cause="erase request")

    accepted = b.accept(alice("m2"), AFTER)
    ran = a.run_next(alice("m2"), echo, collect([]))

    assert accepted.duplicate is None and ran is not None and ran.item_id == accepted.item_id
    assert words(make_turnlog(owner="reader"), ran.session_id) == [AFTER, f"re: {AFTER}"]


def test_a_refused_write_leaves_no_event_sealed_under_the_erased_key(gateways, make_turnlog):
    a, b = gateways
    b.handle_message(alice("m1"), BEFORE, echo, collect([]))
    erased_at = a.erase_subject("telegram:42", actor="operator", cause="erase request").position
    b.handle_message(alice("m2"), AFTER, echo, collect([]))

    reader = make_turnlog(owner="reader")
    later = [e for e in reader.events_around(erased_at, before=0, after=200) if e.position > erased_at]
    assert later and all("[erased]" not in e.summary for e in later)
    assert reader.maintenance.verify_chain().breaks == []


def test_the_asyncio_path_takes_words_after_another_gateways_erase_too(gateways, make_turnlog):
    a, b = gateways
    b.handle_message(alice("m1"), BEFORE, echo, collect([]))
    a.erase_subject("telegram:42", actor="operator", cause="erase request")

    async def agent(history, item) -> str:
        return f"re: {item.text}"

    async def send(text: str) -> None:
        pass

    async def main() -> str:
        outcomes = await AsyncTurnlog(b).handle_message(alice("m2"), AFTER, agent, send)
        return outcomes[0].session_id

    session_id = asyncio.run(main())
    assert words(make_turnlog(owner="reader"), session_id) == [AFTER, f"re: {AFTER}"]


def test_a_group_members_words_stay_readable_when_another_member_is_erased_elsewhere(gateways, make_turnlog):
    a, b = gateways
    member = dataclasses.replace(alice("g1"), chat_type="group", chat_id="-100")
    other = dataclasses.replace(member, user_id="43", message_id="g2")
    b.handle_message(member, BEFORE, echo, collect([]))
    a.erase_subject("telegram:42", actor="operator", cause="erase request")
    outcome = b.handle_message(other, AFTER, echo, collect([]))[0]
    assert words(make_turnlog(owner="reader"), outcome.session_id)[-2:] == [AFTER, f"re: {AFTER}"]


def in_the_group(user: str, message_id: str) -> SessionSource:
    return SessionSource(platform="telegram", chat_type="group", chat_id="-100", user_id=user, message_id=message_id)


def test_a_gateway_forgets_an_erased_subjects_words_in_its_cached_history_by_the_next_check(make_turnlog, clock):
    config = EngineConfig(group_sessions_per_user=False)  # one session for the whole group
    ids = SequentialIds()
    a = make_turnlog(session_ids=ids, owner="gateway-a", config=config)
    b = make_turnlog(session_ids=ids, owner="gateway-b", config=config)
    histories: list[list[str]] = []

    def agent(history, item) -> str:
        histories.append([m.content for m in history])
        return "noted"

    b.handle_message(in_the_group("43", "g1"), "bob opens the group", agent, collect([]))
    b.handle_message(in_the_group("42", "g2"), BEFORE, agent, collect([]))  # b's copy of the history holds it
    a.erase_subject("telegram:42", actor="operator", cause="erase request")
    clock.advance(seconds=config.erasure_check_s)
    b.handle_message(in_the_group("43", "g3"), "bob again", agent, collect([]))

    assert BEFORE in histories[1]
    assert BEFORE not in histories[2] and "[erased]" in histories[2] and "bob again" in histories[2]


def test_erasure_check_s_is_a_number_of_seconds_not_below_zero():
    assert EngineConfig(erasure_check_s=0).erasure_check_s == 0
    for bad in (-1, "1", None):
        with pytest.raises(ValueError, match="erasure_check_s"):
            EngineConfig(erasure_check_s=bad)
