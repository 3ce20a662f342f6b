"""Durable inbound dedup (docs/behaviour.md §14, kept in the log): a repeat is recorded as refused and never run."""

import multiprocessing

import pytest

from turnlog import EngineConfig, ManualClock, SequentialIds, SessionSource, Turnlog

from chat import alice, echo

KEY = "agent:main:telegram:dm:42"
WX_KEY = "agent:main:weixin:dm:u1"


def weixin(message_id=None, user="u1"):
    return SessionSource(platform="weixin", chat_type="dm", chat_id=user, user_id=user, message_id=message_id)


def user_messages(t, key):
    return [m["content"] for s in t.sessions() if s.session_key == key
            for m in t.transcript(s.session_id) if m["role"] == "user"]


def refusals(t, key):
    return [(h.actor, h.cause, h.data["reason"], h.data["message_id"], h.data["duplicate_of"])
            for h in t.history(key, types=["InboundDuplicateRefused"])]


def test_the_same_message_id_twice_across_a_restart_runs_once(tmp_path):
    db = tmp_path / "d.db"
    clock = ManualClock()
    sent = []
    with Turnlog(db, clock=clock, session_ids=SequentialIds()) as t:
        assert len(t.handle_message(alice("m1"), "hello", echo, sent.append)) == 1
    clock.advance(3600)  # far outside any time window: only the log remembers
    with Turnlog(db, clock=clock, session_ids=SequentialIds()) as t:  # a new process on the same file
        assert t.handle_message(alice("m1"), "hello", echo, sent.append) == []
        again = t.accept(alice("m1"), "hello (edited)")
        assert again.duplicate == "message_id" and again.item_id == "1"
        assert user_messages(t, KEY) == ["hello"]
        assert sent == ["re: hello"]
        assert t.queue(KEY) == []
        assert refusals(t, KEY) == [("telegram:user:42", "message:m1", "message_id", "m1", "1")] * 2


def test_a_message_id_is_judged_per_routing_key(tmp_path):
    with Turnlog(tmp_path / "d.db", clock=ManualClock(), session_ids=SequentialIds()) as t:
        t.handle_message(alice("m1"), "hello", echo, lambda text: None)
        bob = SessionSource(platform="telegram", chat_type="dm", chat_id="7", user_id="7", message_id="m1")
        assert len(t.handle_message(bob, "hello", echo, lambda text: None)) == 1


def test_the_same_text_from_one_sender_runs_once_within_the_window_and_again_after_it(tmp_path):
    clock = ManualClock()
    with Turnlog(tmp_path / "d.db", clock=clock, session_ids=SequentialIds()) as t:
        assert len(t.handle_message(weixin("w1"), "ok", echo, lambda text: None)) == 1
        clock.advance(200)
        assert t.handle_message(weixin("w2"), "ok", echo, lambda text: None) == []
        clock.advance(99)  # 299 s after the first sighting: a repeat does not extend the window
        assert t.handle_message(weixin("w3"), "ok", echo, lambda text: None) == []
        assert len(t.handle_message(weixin("w4", user="u2"), "ok", echo, lambda text: None)) == 1  # other sender
        assert len(t.handle_message(weixin("w5"), "ok?", echo, lambda text: None)) == 1  # other text
        clock.advance(1)  # 300 s: the window is over
        assert len(t.handle_message(weixin("w6"), "ok", echo, lambda text: None)) == 1
        assert user_messages(t, WX_KEY) == ["ok", "ok?", "ok"]
        assert [(r[2], r[3]) for r in refusals(t, WX_KEY)] == [("same_text", "w2"), ("same_text", "w3")]


def test_the_text_window_survives_a_restart_and_is_configurable(tmp_path):
    db = tmp_path / "d.db"
    clock = ManualClock()
    config = EngineConfig(dedup_window_s=60, dedup_text_platforms=frozenset({"*"}))
    with Turnlog(db, clock=clock, session_ids=SequentialIds(), config=config) as t:
        t.handle_message(alice(), "ok", echo, lambda text: None)  # no message id: the text rule alone
    clock.advance(59)
    with Turnlog(db, clock=clock, session_ids=SequentialIds(), config=config) as t:
        assert t.handle_message(alice(), "ok", echo, lambda text: None) == []
        clock.advance(1)
        assert len(t.handle_message(alice(), "ok", echo, lambda text: None)) == 1


def test_telegram_texts_are_not_judged_by_content_by_default(tmp_path):
    with Turnlog(tmp_path / "d.db", clock=ManualClock(), session_ids=SequentialIds()) as t:
        t.handle_message(alice("m1"), "ok", echo, lambda text: None)
        assert len(t.handle_message(alice("m2"), "ok", echo, lambda text: None)) == 1


def test_a_redelivered_command_is_refused_and_not_run_twice(tmp_path):
    clock = ManualClock()
    with Turnlog(tmp_path / "d.db", clock=clock, session_ids=SequentialIds()) as t:
        first = t.handle_message(alice("m1"), "hello", echo, lambda text: None)[0].session_id
        assert t.command(alice("c1"), "/new").changed
        second = t.handle_message(alice("m2"), "hello again", echo, lambda text: None)[0].session_id
        repeat = t.command(alice("c1"), "/new")
        assert (repeat.changed, repeat.reply) == (False, None)
        assert t.handle_message(alice("m3"), "still here?", echo, lambda text: None)[0].session_id == second != first
        assert t.command(alice("q1"), "/queue later").changed
        assert not t.command(alice("q1"), "/queue later").changed
        assert [q.text for q in t.queue(KEY)] == ["later"]
        assert [r[2:4] for r in refusals(t, KEY)] == [("message_id", "c1"), ("message_id", "q1")]


def _accept_in_child(db, ready, go, results):
    with Turnlog(db) as t:
        ready.wait()
        go.wait()
        results.put(t.accept(alice("race"), "hello").duplicate)


def test_two_processes_accepting_one_message_id_at_once_accept_it_once(tmp_path):
    db = str(tmp_path / "d.db")
    Turnlog(db).close()
    ctx = multiprocessing.get_context("spawn")
    ready, go, results = ctx.Barrier(5), ctx.Event(), ctx.Queue()
    children = [ctx.Process(target=_accept_in_child, args=(db, ready, go, results)) for _ in range(4)]
    for child in children:
        child.start()
    ready.wait()
    go.set()
    outcomes = sorted(str(results.get(timeout=120)) for _ in children)
    for child in children:
        child.join(60)
    assert outcomes == ["None", "message_id", "message_id", "message_id"]
    with Turnlog(db) as t:
        assert [q.text for q in t.queue(alice())] == ["hello"]


def test_the_text_window_is_settable_per_platform_for_its_retry_window(tmp_path):
    feishu = SessionSource(platform="feishu", chat_type="dm", chat_id="f1", user_id="f1")
    slack = SessionSource(platform="slack", chat_type="dm", chat_id="s1", user_id="s1", guild_id="T1")
    config = EngineConfig(dedup_window_s={"feishu": 7 * 3600, "*": 300}, dedup_text_platforms=frozenset({"*"}))
    clock = ManualClock()
    with Turnlog(tmp_path / "d.db", clock=clock, session_ids=SequentialIds(), config=config) as t:
        for src in (feishu, slack):
            assert len(t.handle_message(src, "deploy", echo, lambda text: None)) == 1
        clock.advance(6 * 3600)  # Feishu still retries this event; Slack gave up after 5 minutes
        assert t.handle_message(feishu, "deploy", echo, lambda text: None) == []
        assert len(t.handle_message(slack, "deploy", echo, lambda text: None)) == 1


def test_a_window_beyond_what_the_inbox_remembers_is_refused():
    for bad in ({"feishu": 9 * 3600}, -1, "300", {"slack": True}):
        with pytest.raises(ValueError, match="dedup_window_s"):
            EngineConfig(dedup_window_s=bad)


def test_a_text_whose_first_sighting_started_its_turn_at_once_is_refused_again_after_a_restart(tmp_path):
    db = tmp_path / "d.db"
    clock = ManualClock()
    with Turnlog(db, clock=clock, session_ids=SequentialIds()) as t:
        assert len(t.handle_message(weixin("w1"), "ok", echo, lambda text: None)) == 1
        [first] = t.history(WX_KEY, types=["InboundAccepted"])
        # accepted and started in one event, without the words: its dedup key is what is remembered
        assert (first.data["text"], first.data["content_key"] is not None) == (None, True)
        assert first.data["turn_id"] is not None
        assert t.handle_message(weixin("w2"), "ok", echo, lambda text: None) == []
    clock.advance(60)
    with Turnlog(db, clock=clock, session_ids=SequentialIds()) as t:  # the inbox replayed from the log
        assert t.handle_message(weixin("w3"), "ok", echo, lambda text: None) == []
        assert len(t.handle_message(weixin("w4"), "ok!", echo, lambda text: None)) == 1
        assert [r[2:4] for r in refusals(t, WX_KEY)] == [("same_text", "w2"), ("same_text", "w3")]
        assert user_messages(t, WX_KEY) == ["ok", "ok!"]
