"""The agent's history is this process's copy of the transcript topped up from the log
(storage/transcripts.py): a later turn reads the messages added since, not the whole transcript,
and still sees every message, whichever gateway wrote it, and nothing an erase destroyed."""

from __future__ import annotations

import asyncio

from turnlog.aio import AsyncTurnlog

from chat import ALICE, alice


def seen_by_agent(log):
    def agent(history, item):
        log.append([(m.role, m.content) for m in history])
        return f"re: {item.text}"
    return agent


def nowhere(text):
    pass


class DecodedMessages:
    """How many transcript messages the engine decodes from the log (the mapper's reads)."""

    def __init__(self, engine):
        self.count = 0
        mapper = engine._app.mapper
        decode = mapper.to_domain_event

        def spy(stored):
            event = decode(stored)
            if type(event).__name__ == "MessageAppended":
                self.count += 1
            return event

        mapper.to_domain_event = spy


def test_a_later_turns_history_decodes_only_the_messages_added_since(t):
    seen: list = []
    for n in range(8):
        t.handle_message(ALICE, f"message {n}", seen_by_agent(seen), nowhere)
    decoded = DecodedMessages(t)
    t.handle_message(ALICE, "the ninth", seen_by_agent(seen), nowhere)
    assert len(seen[-1]) == 17  # 8 turns of two messages, and this turn's own
    assert seen[-1][-1] == ("user", "the ninth")
    assert decoded.count <= 2, decoded.count  # this turn's user message, not the 16 before it


def test_the_history_holds_every_message_whichever_gateway_wrote_it(t, other):
    seen: list = []
    t.handle_message(ALICE, "one", seen_by_agent(seen), nowhere)
    other.handle_message(ALICE, "two", seen_by_agent(seen), nowhere)
    t.handle_message(ALICE, "three", seen_by_agent(seen), nowhere)
    assert seen[-1] == [("user", "one"), ("assistant", "re: one"), ("user", "two"), ("assistant", "re: two"),
                        ("user", "three")]
    session_id = t.session(ALICE).session_id
    assert [(m["role"], m["content"]) for m in t.transcript(session_id)][:5] == seen[-1]


def test_the_history_after_an_undo_and_on_the_asyncio_path_is_the_transcript_as_edited(t):
    seen: list = []
    t.handle_message(ALICE, "one", seen_by_agent(seen), nowhere)
    t.handle_message(ALICE, "two", seen_by_agent(seen), nowhere)
    t.command(ALICE, "/undo")
    session_id = t.session(ALICE).session_id
    assert [(m.role, m.content) for m in t.turns.agent_history(session_id)] == \
        [("user", "one"), ("assistant", "re: one")]

    async def agent(history, item):
        seen.append([(m.role, m.content) for m in history])
        return f"re: {item.text}"

    async def send(text):
        pass

    async def main():
        a = AsyncTurnlog(t)
        await a.handle_message(ALICE, "three", agent, send)
        a.shutdown_threads()
    asyncio.run(main())
    assert seen[-1] == [("user", "one"), ("assistant", "re: one"), ("user", "three")]


def test_an_erase_leaves_no_cached_words_in_the_history(make_turnlog):
    t = make_turnlog()
    seen: list = []
    t.handle_message(alice(user_name="alice"), "marmalade lighthouse", seen_by_agent(seen), nowhere)
    t.handle_message(alice(user_name="alice"), "second", seen_by_agent(seen), nowhere)
    session_id = t.session(alice()).session_id
    assert ("user", "marmalade lighthouse") in [(m.role, m.content) for m in t.turns.agent_history(session_id)]
    t.erase_subject("telegram:42", actor="operator", cause="erase request")
    assert {m.content for m in t.turns.agent_history(session_id)} == {"[erased]"}


def test_an_archived_sessions_history_leaves_with_it_and_comes_back_with_its_restore(t, clock, tmp_path):
    seen: list = []
    for n in range(3):
        t.handle_message(ALICE, f"message {n}", seen_by_agent(seen), nowhere)
    old = t.session(ALICE).session_id
    before = [(m.role, m.content) for m in t.turns.agent_history(old)]
    t.command(ALICE, "/reset")
    clock.advance(days=100)
    report = t.archive(tmp_path / "old.tlar")
    assert [c.session_id for c in report.sessions] == [old]
    assert t.turns.agent_history(old) == []
    t.restore_archive(tmp_path / "old.tlar")
    assert [(m.role, m.content) for m in t.turns.agent_history(old)] == before
