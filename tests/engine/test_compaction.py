"""In-place compaction (docs/behaviour.md §11): /compress and /compress here N through the chat,
the summariser the gateway supplies (sync or async), the hygiene path by compression mode, and
time travel across a compaction."""

from __future__ import annotations

import asyncio

import pytest

from turnlog import CompactionFailed, EngineConfig, LeaseTimeout, StaleLease
from turnlog.aio import AsyncTurnlog

from chat import alice, collect, echo


def talk(t, turns: int) -> str:
    for i in range(turns):
        t.handle_message(alice(f"m{i}"), f"question {i}", echo, collect([]))
    return t.session(alice()).session_id


class Recorder:
    """A summariser that records what it was given and answers (summary, model)."""

    def __init__(self, answer="the gist of it", model="summary-model-1"):
        self.calls: list[tuple[list[tuple[str, str]], str | None]] = []
        self.answer, self.model_name = answer, model

    def __call__(self, messages, focus):
        self.calls.append(([(m.role, m.content) for m in messages], focus))
        return self.answer, self.model_name


def contents(history):
    return [(m.role, m.content) for m in history]


def test_compress_replaces_the_history_with_a_summary_that_the_next_responder_sees(make_turnlog):
    summariser = Recorder()
    t = make_turnlog(config=EngineConfig(summariser=summariser))
    sid = talk(t, 3)
    old = contents(t.turns.agent_history(sid))

    result = t.command(alice(), "/compress the budget")

    assert result.changed and result.session_id == sid
    assert result.reply.splitlines() == ["🗜️ Compressed: 6 → 1 messages (6 summarised)", 'Focus: "the budget"',
                                         "Approx history size: ~18 → ~4 tokens",
                                         "The original messages stay in the log and in search."]
    assert summariser.calls == [(old, "the budget")]
    assert contents(t.turns.agent_history(sid)) == [("user", "the gist of it")]
    assert len(t.transcript(sid)) == 6  # nothing left the log
    [event] = [e for e in t.history(sid) if e.event == "TranscriptCompacted"]
    assert (event.data["from_seq"], event.data["upto_seq"], event.data["focus"], event.data["model"],
            event.data["kept_turns"]) == (1, 6, "the budget", "summary-model-1", 0)
    assert event.data["summary"] == [{"role": "user", "content": "the gist of it"}]
    assert event.actor == "telegram:user:42"  # the sender, as for every command
    assert event.cause == "command:/compress"
    assert event.summary == "history compacted: seqs 1..6 -> a summary (focus 'the budget') by summary-model-1"

    seen = {}

    def agent(history, item):
        seen["history"] = contents(history)
        return "fine"
    t.handle_message(alice("m9"), "and now?", agent, collect([]))
    assert seen["history"] == [("user", "the gist of it"), ("user", "and now?")]


def test_compress_here_keeps_the_last_turns_verbatim(make_turnlog):
    def summariser(messages, focus):
        return [{"role": "user", "content": f"{len(messages)} messages, summarised"}]
    summariser.model = "attr-model"  # type: ignore[attr-defined]
    t = make_turnlog(config=EngineConfig(summariser=summariser))
    sid = talk(t, 4)

    result = t.command(alice(), "/compress here 2")

    assert result.reply.splitlines()[0] == ("🗜️ Compressed: 8 → 5 messages (4 summarised, the last 2 turn(s)"
                                            " kept as they are)")
    history = t.turns.agent_history(sid)
    assert contents(history) == [("user", "4 messages, summarised"), ("user", "question 2"),
                                 ("assistant", "re: question 2"), ("user", "question 3"),
                                 ("assistant", "re: question 3")]
    assert [m.originator_version for m in history] == [4, 5, 6, 7, 8]  # the summary stands at the range's end
    [event] = [e for e in t.history(sid) if e.event == "TranscriptCompacted"]
    assert (event.data["upto_seq"], event.data["kept_turns"], event.data["model"]) == (4, 2, "attr-model")


def test_a_second_compaction_summarises_the_first_summary_too(make_turnlog):
    summariser = Recorder(answer="second gist")
    t = make_turnlog(config=EngineConfig(summariser=summariser))
    sid = talk(t, 3)
    t.command(alice(), "/compress here 1")
    t.handle_message(alice("m7"), "more", echo, collect([]))
    t.command(alice(), "/compress")
    first_summary = ("user", "second gist")
    assert summariser.calls[1][0][0] == first_summary  # the earlier summary is part of what is replaced
    assert contents(t.turns.agent_history(sid)) == [first_summary]


def test_without_a_summariser_the_fallback_summary_stands(t):
    sid = talk(t, 2)
    assert t.command(alice(), "/compress").changed
    [summary] = t.turns.agent_history(sid)
    assert summary.content.startswith("[CONTEXT COMPACTION — REFERENCE ONLY]")
    assert "- asked: question 0" in summary.content and "- asked: question 1" in summary.content


def test_a_summariser_that_raises_changes_nothing_and_says_so(make_turnlog):
    def broken(messages, focus):
        raise RuntimeError("the model is down")
    t = make_turnlog(config=EngineConfig(summariser=broken))
    sid = talk(t, 3)
    head = t.maintenance.log_head()

    result = t.command(alice(), "/compress")

    assert not result.changed
    assert result.reply == ("Compression failed: the summariser failed: RuntimeError: the model is down."
                            " The history was not changed.")
    assert t.maintenance.log_head() == head
    assert len(t.turns.agent_history(sid)) == 6
    with pytest.raises(CompactionFailed, match="the model is down"):
        t.compact(sid)
    assert t.maintenance.log_head() == head


def test_a_summariser_answering_no_summary_changes_nothing(make_turnlog):
    t = make_turnlog(config=EngineConfig(summariser=lambda messages, focus: "   "))
    talk(t, 2)
    head = t.maintenance.log_head()
    assert t.command(alice(), "/compress").reply.startswith("Compression failed: the summariser's answer is not a")
    assert t.maintenance.log_head() == head


def test_too_little_conversation_and_a_bad_count_are_answered(t):
    assert t.command(alice(), "/compress").reply == "Not enough conversation to compress (need at least 4 messages)."
    talk(t, 1)
    assert t.command(alice(), "/compress").reply == "Not enough conversation to compress (need at least 4 messages)."
    talk(t, 2)
    assert t.command(alice(), "/compress here 0").reply.startswith("Usage: /compress [focus]")
    assert t.command(alice(), "/compress here 5").reply == ("Nothing to compact: the history holds 2 turn(s),"
                                                            " 5 to keep.")


def test_compress_is_refused_while_a_turn_runs(make_turnlog):
    summariser = Recorder()
    t = make_turnlog(config=EngineConfig(summariser=summariser))
    sid = talk(t, 2)
    token = t.turns.acquire_lease(sid, t.routing_key(alice()))
    head = t.maintenance.log_head()

    result = t.command(alice(), "/compress")

    assert result.reply.startswith("⏳ A turn is running on this session") and not result.changed
    assert summariser.calls == [] and t.maintenance.log_head() == head
    t.turns.release_lease(token)
    assert t.command(alice(), "/compress").changed


def test_a_turn_begun_while_the_summariser_runs_makes_the_compaction_refused(make_turnlog):
    box = {}

    def slow(messages, focus):  # a turn takes the lease while the summary is being written
        box["token"] = box["t"].turns.acquire_lease(box["sid"], box["t"].routing_key(alice()))
        return "too late"
    t = box["t"] = make_turnlog(config=EngineConfig(summariser=slow))
    sid = box["sid"] = talk(t, 2)

    result = t.command(alice(), "/compress")

    assert result.reply.startswith("⏳") and not result.changed
    assert not [e for e in t.history(sid) if e.event == "TranscriptCompacted"]


def test_a_message_routed_while_the_summariser_runs_does_not_spoil_the_compaction(make_turnlog):
    box = {}

    def summariser(messages, focus):  # the chat goes on: the session is touched, an item waits
        box["t"].accept(alice("late"), "a message meanwhile")
        return "gist"
    t = box["t"] = make_turnlog(config=EngineConfig(summariser=summariser))
    sid = talk(t, 2)
    assert t.command(alice(), "/compress").changed
    seen = {}
    t.run_next(alice(), lambda history, item: seen.setdefault("history", contents(history)) and "ok", collect([]))
    assert seen["history"] == [("user", "gist"), ("user", "a message meanwhile")]


def test_the_compaction_commits_with_an_instant_hold_of_the_lease(t):
    sid = talk(t, 2)
    t.command(alice(), "/compress")
    last = [e for e in t.history(sid)][-3:]
    assert [e.event for e in last] == ["LeaseAcquired", "LeaseReleased", "TranscriptCompacted"]  # one transaction
    assert last[1].data["outcome"] == "compacted"
    assert t.turns.holder(sid) is None
    outcome = t.handle_message(alice("m5"), "after", echo, collect([]))
    assert outcome[0].user_seq == 5  # the transcript continues where it was


def test_time_travel_before_a_compaction_shows_the_old_history_and_diff_names_it(make_turnlog):
    t = make_turnlog(config=EngineConfig(summariser=Recorder()))
    sid = talk(t, 3)
    before = t.maintenance.log_head()
    old = [(m["role"], m["content"]) for m in t.at(before).agent_history(sid)]

    t.command(alice(), "/compress here 1 names")
    after = t.maintenance.log_head()

    assert old == contents(t.turns.transcript(sid))
    assert [(m["role"], m["content"]) for m in t.at(after).agent_history(sid)] == [
        ("user", "the gist of it"), ("user", "question 2"), ("assistant", "re: question 2")]
    assert len(t.at(after).transcript(sid)) == 6  # the transcript itself is unchanged
    change = t.diff(before, after)["sessions"][sid]
    assert [{k: e[k] for k in ("edit", "from_seq", "upto_seq", "focus", "model")}
            for e in change["history_edits"]] == [
        {"edit": "compacted", "from_seq": 1, "upto_seq": 4, "focus": "names", "model": "summary-model-1"}]
    assert "messages_added" not in change


def test_an_async_summariser_is_awaited_on_the_asyncio_apis_loop(make_turnlog):
    loops = []

    async def summariser(messages, focus):
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)
        return f"async gist of {len(messages)}", "async-model"
    t = make_turnlog(config=EngineConfig(summariser=summariser))
    sid = talk(t, 2)

    async def main():
        at = AsyncTurnlog(t)
        result = await at.command(alice(), "/compress")
        seen = {}

        async def agent(history, item):
            seen["history"] = contents(history)
            return "ok"
        await at.handle_message(alice("m8"), "next", agent, collect_async([]))
        return result, seen, asyncio.get_running_loop()
    result, seen, loop = asyncio.run(main())

    assert result.changed and loops == [loop]
    assert seen["history"] == [("user", "async gist of 4"), ("user", "next")]
    [event] = [e for e in t.history(sid) if e.event == "TranscriptCompacted"]
    assert event.data["model"] == "async-model"


def test_hygiene_through_the_asyncio_api_awaits_the_summariser_on_its_loop(make_turnlog):
    loops = []

    async def summariser(messages, focus):
        loops.append(asyncio.get_running_loop())
        return "hygiene gist"
    t = make_turnlog(config=EngineConfig(summariser=summariser))
    sid = talk(t, 3)

    async def main():
        at = AsyncTurnlog(t)
        token = await at.run(t.turns.acquire_lease, sid, t.routing_key(alice()))
        assert await at.compress(token, alice()) == token
        await at.run(t.turns.release_lease, token)
        return asyncio.get_running_loop()
    loop = asyncio.run(main())

    assert loops == [loop]
    assert contents(t.turns.agent_history(sid)) == [("user", "hygiene gist"), ("user", "question 2"),
                                                    ("assistant", "re: question 2")]


def collect_async(sent):
    async def send(text):
        sent.append(text)
    return send


def test_the_sync_api_runs_an_async_summariser_too(make_turnlog):
    async def summariser(messages, focus):
        await asyncio.sleep(0)
        return "gist from a coroutine"
    t = make_turnlog(config=EngineConfig(summariser=summariser))
    sid = talk(t, 2)
    assert t.compact(sid).summary_chars == len("gist from a coroutine")
    assert contents(t.turns.agent_history(sid)) == [("user", "gist from a coroutine")]


def test_hygiene_compacts_in_place_by_default(make_turnlog):
    t = make_turnlog(config=EngineConfig(summariser=Recorder()))
    sid = talk(t, 3)
    token = t.turns.acquire_lease(sid, t.routing_key(alice()))
    t.turns.append_message(token, "user", "the new question")
    assert t.turns.needs_compression(token, prompt_tokens=900, context_length=1000)

    assert t.turns.compress(token, alice()) == token  # the same session, the same lease

    assert contents(t.turns.agent_history(sid)) == [("user", "the gist of it"), ("user", "the new question")]
    assert not t.turns.needs_compression(token, prompt_tokens=10, context_length=1000)
    t.turns.append_message(token, "assistant", "answered")  # the turn goes on under its lease
    t.turns.release_lease(token)
    assert t.session(alice()).session_id == sid
    [event] = [e for e in t.history(sid) if e.event == "TranscriptCompacted"]
    assert (event.cause, event.data["kept_turns"]) == ("hygiene", 1)


def test_hygiene_rotates_under_the_rotate_mode(make_turnlog):
    t = make_turnlog(config=EngineConfig(compression_mode="rotate"))
    sid = talk(t, 3)
    token = t.turns.acquire_lease(sid, t.routing_key(alice()))

    child = t.turns.compress(token, alice())

    assert child.session_id != sid and t.session(sid).end_reason == "compression"
    assert not [e for e in t.history(sid) if e.event == "TranscriptCompacted"]
    assert t.session(alice()).session_id == child.session_id
    t.turns.release_lease(child)


def test_a_bad_compression_mode_is_refused():
    with pytest.raises(ValueError, match="compression_mode"):
        EngineConfig(compression_mode="sideways")


def test_compact_under_a_token_is_fenced_by_its_lease(t):
    sid = talk(t, 2)
    token = t.turns.acquire_lease(sid, t.routing_key(alice()))
    done = t.turns.compact(token, summary="by hand")
    assert (done.from_seq, done.upto_seq, done.messages_compacted, done.history_after) == (1, 4, 4, 1)
    assert [e.event for e in t.history(sid)][-2:] == ["LeaseRenewed", "TranscriptCompacted"]
    t.turns.append_message(token, "user", "one more")
    t.command(alice(), "/stop")  # revokes the lease
    head = t.maintenance.log_head()
    with pytest.raises(StaleLease):
        t.turns.compact(token, summary="too late")
    assert t.maintenance.log_head() == head


def test_an_operator_compaction_names_what_it_did(t):
    sid = talk(t, 3)
    done = t.compact(alice(), keep_turns=1, focus="names", summary="operator's own summary", actor="ops")
    assert done.to_dict() == {"session_id": sid, "from_seq": 1, "upto_seq": 4, "messages_compacted": 4,
                              "history_before": 6, "history_after": 3, "summary_messages": 1,
                              "summary_chars": len("operator's own summary"), "tokens_before": 18,
                              "tokens_after": (len("operator's own summary") + 10 + 14 + 3) // 4,
                              "kept_turns": 1, "focus": "names",
                              "model": None, "position": t.maintenance.log_head()}
    [event] = [e for e in t.history(sid) if e.event == "TranscriptCompacted"]
    assert (event.actor, event.cause) == ("ops", "compact")
    token = t.turns.acquire_lease(sid, t.routing_key(alice()))
    with pytest.raises(LeaseTimeout):
        t.compact(sid, summary="while a turn runs")
    t.turns.release_lease(token)
