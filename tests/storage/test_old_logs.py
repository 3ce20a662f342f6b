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
    report = old.verify()
    assert report["ok"], report


def test_turns_continue_an_old_log_at_the_right_seq_and_epoch(old):
    # Copies: ALICE is shared by every test module (tests/chat.py).
    alice, = old.handle_message(replace(ALICE, message_id="a2"), "again", reply, lambda text: None)
    bob, = old.handle_message(replace(BOB, message_id="b3"), "again", reply, lambda text: None)
    # the old log: alice 1 turn (seqs 1-2, epoch 1); bob 2 turns and another owner's bare lease (seqs 1-4, epoch 3)
    assert (alice.epoch, alice.user_seq, alice.reply_seq) == (2, 3, 4)
    assert (bob.epoch, bob.user_seq, bob.reply_seq) == (4, 5, 6)
    assert [m["seq"] for m in old.transcript(bob.session_id)] == [1, 2, 3, 4, 5, 6]
    assert old.verify()["ok"]


def test_an_old_logs_deliveries_keep_the_words_their_events_carry(old):
    # Version-1 DeliveryRecorded events hold their reply's words; newer ones refer to the message.
    replies = {(s["session_id"], m["seq"]): m["content"] for s in old.sessions()
               for m in old.transcript(s["session_id"]) if m["role"] == "assistant"}
    rows = old.ledger()
    assert len(rows) == 3 and {(r.session_id, r.seq): r.content for r in rows} == replies
