"""Optional text batching (docs/behaviour.md §14): a burst of texts on one key within the debounce window is one turn."""

from datetime import timedelta

from turnlog import EngineConfig, ManualClock, SequentialIds, SessionSource, TextBatching, Turnlog

from chat import echo

WX = SessionSource(platform="weixin", chat_type="dm", chat_id="u1", user_id="u1")
TG = SessionSource(platform="telegram", chat_type="dm", chat_id="1", user_id="1")


def engine(tmp_path, clock, platforms=frozenset({"weixin"})):
    config = EngineConfig(text_batching=TextBatching(platforms=platforms))
    return Turnlog(tmp_path / "b.db", clock=clock, session_ids=SequentialIds(), config=config)


def msg(source, n):
    return SessionSource(**{**source.__dict__, "message_id": f"m{n}"})


def test_texts_within_the_window_are_merged_into_one_turn_after_it(tmp_path):
    clock = ManualClock()
    sent = []
    with engine(tmp_path, clock) as t:
        assert t.handle_message(msg(WX, 1), "first", echo, sent.append) == []
        clock.advance(2)
        assert t.handle_message(msg(WX, 2), "second", echo, sent.append) == []
        assert t.next_batch_due() == clock.now() + timedelta(seconds=3)
        clock.advance(2.9)  # each arrival restarts the wait: 3 s after the LAST text
        assert t.run_due_batches(echo, sent.append) == []
        clock.advance(0.1)
        outcomes = t.run_due_batches(echo, sent.append)
        assert len(outcomes) == 1 and sent == ["re: first\nsecond"]
        assert t.next_batch_due() is None
        clock.advance(10)
        t.handle_message(msg(WX, 3), "later", echo, sent.append)
        clock.advance(3)
        assert len(t.run_due_batches(echo, sent.append)) == 1 and sent[-1] == "re: later"


def test_a_long_chunk_waits_five_seconds(tmp_path):
    clock = ManualClock()
    sent = []
    with engine(tmp_path, clock) as t:
        t.handle_message(msg(WX, 1), "x" * 1800, echo, sent.append)
        clock.advance(4.9)
        assert t.run_due_batches(echo, sent.append) == []
        clock.advance(0.1)
        assert len(t.run_due_batches(echo, sent.append)) == 1


def test_other_platforms_and_non_text_items_are_not_held_back(tmp_path):
    clock = ManualClock()
    sent = []
    with engine(tmp_path, clock) as t:
        assert len(t.handle_message(msg(TG, 1), "now", echo, sent.append)) == 1
        assert t.command(msg(WX, 2), "/queue a queued item").changed
        assert [o.item_id for o in t.run_due_batches(echo, sent.append)] == ["1"]  # at once, no window
        assert sent == ["re: now", "re: a queued item"]


def test_batching_is_off_by_default(tmp_path):
    with Turnlog(tmp_path / "b.db", clock=ManualClock(), session_ids=SequentialIds()) as t:
        assert len(t.handle_message(msg(WX, 1), "first", echo, lambda text: None)) == 1
