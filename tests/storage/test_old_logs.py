"""Logs written by earlier versions stay readable and replay to the same state (DESIGN: stored
events live forever). tests/data/turns-v1-lease-acquired.db was written by turnlog at a0c9696, whose turn
start saved a LeaseRenewed beside each version-1 LeaseAcquired (no `last_seq`): three turns on two
keys, the last one run after waiting for another owner's lease (tests/data/README.md)."""

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog

from chat import ALICE

OLD_DB = Path(__file__).parents[1] / "data" / "turns-v1-lease-acquired.db"
BOB = SessionSource(platform="discord", chat_id="7", user_id="7", user_name="bob")


def reply(history, item):
    return f"re: {item.text}"


@pytest.fixture
def old(tmp_path):
    db = tmp_path / "old.db"
    shutil.copy(OLD_DB, db)
    clock = ManualClock()
    clock.advance(3600)  # after the old log's turns
    with Turnlog(str(db), clock=clock, session_ids=SequentialIds(), owner="new") as t:
        yield t


def test_an_old_log_rebuilds_to_the_read_models_it_had(old):
    report = old.maintenance.verify()
    assert report["ok"], report


def test_turns_continue_an_old_log_at_the_right_seq_and_epoch(old):
    # Copies: ALICE is shared by every test module (tests/chat.py).
    alice, = old.handle_message(replace(ALICE, message_id="a2"), "again", reply, lambda text: None)
    bob, = old.handle_message(replace(BOB, message_id="b3"), "again", reply, lambda text: None)
    # the old log: alice 1 turn (seqs 1-2, epoch 1); bob 2 turns and another owner's bare lease (seqs 1-4, epoch 3)
    assert (alice.epoch, alice.user_seq, alice.reply_seq) == (2, 3, 4)
    assert (bob.epoch, bob.user_seq, bob.reply_seq) == (4, 5, 6)
    assert [m["seq"] for m in old.transcript(bob.session_id)] == [1, 2, 3, 4, 5, 6]
    assert old.maintenance.verify()["ok"]


def test_an_old_logs_deliveries_keep_the_words_their_events_carry(old):
    # Version-1 DeliveryRecorded events hold their reply's words; newer ones refer to the message.
    replies = {(s.session_id, m["seq"]): m["content"] for s in old.sessions()
               for m in old.transcript(s.session_id) if m["role"] == "assistant"}
    rows = old.ledger()
    assert len(rows) == 3 and {(r.session_id, r.seq): r.content for r in rows} == replies


# Written by turnlog f27f2f0 (tests/data/make_inbox_v1_log.py): version-1 inbox events, each message
# accepted with its text and each start a separate InboundStarted; alice's second turn killed in
# flight, bob's two texts waiting merged into one item.
INBOX_V1_DB = Path(__file__).parents[1] / "data" / "inbox-v1-accepted-started.db"
OLD_ALICE = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42")
OLD_BOB = SessionSource(platform="discord", chat_type="dm", chat_id="7", user_id="7")


@pytest.fixture
def old_inbox(tmp_path):
    db = tmp_path / "old.db"
    shutil.copy(INBOX_V1_DB, db)
    with Turnlog(str(db), clock=ManualClock("2026-03-01T11:00:00+00:00"), session_ids=SequentialIds(),
                 owner="new") as t:
        yield t


def test_an_old_logs_version_1_accepts_and_starts_replay_to_the_same_queue_and_items(old_inbox):
    t = old_inbox
    assert [(q.item_id, q.kind, q.text, q.state, q.message_ids) for q in t.queue(OLD_ALICE)] == [
        ("2", "human", "alice in flight", "started", ["a2"])]
    assert [(q.item_id, q.text, q.state, q.message_ids) for q in t.queue(OLD_BOB)] == [
        ("1", "bob waits\nand adds a line", "pending", ["b1", "b2"])]
    then = t.at(t.maintenance.log_head()).queue("agent:main:telegram:dm:42")
    assert [(q["text"], q["state"]) for q in then] == [("alice in flight", "started")]
    assert [f.to_dict() for f in t.message_fates(OLD_ALICE)] == [
        {"message_id": "a1", "item_id": "1", "state": "completed", "outcome": "answered"},
        {"message_id": "a2", "item_id": "2", "state": "started", "outcome": None}]
    assert t.maintenance.verify()["ok"]


def test_an_old_logs_interrupted_item_and_waiting_texts_run_with_their_words(old_inbox, on_another_host):
    t = old_inbox
    [turn] = t.start_gateway("main").recovery.interrupted
    assert turn.action == "resume_pending"
    seen: list[str] = []

    def agent(history, item):
        seen.append(item.text)
        return "ok"
    assert len(t.resume_interrupted(agent, lambda text: None)) == 1
    assert t.run_next(OLD_BOB, agent, lambda text: None) is not None
    assert seen == ["alice in flight", "bob waits\nand adds a line"]
    alice, = t.handle_message(replace(OLD_ALICE, message_id="a3"), "new words", agent, lambda text: None)
    assert seen[-1] == "new words" and t.queue(OLD_ALICE) == [] and t.queue(OLD_BOB) == []
    assert t.maintenance.verify()["ok"] and t.maintenance.verify_chain().breaks == []
