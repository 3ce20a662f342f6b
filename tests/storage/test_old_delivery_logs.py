"""A log whose turns saved a version-3 DeliveryRecorded with a DeliveryAttempting beside it (as
turnlog did before a delivery could be recorded already attempting) replays to the same ledger
and delivery states, verifies, and is swept and continued as before.
tests/data/deliveries-v3-attempting.db (written by make_delivery_v3_log.py at f27f2f0, read
models included): four turns, their replies delivered, failed, unknown (a timed-out send) and
attempting (interrupted between the save and the send), and a command's answer still pending."""

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.log import events
from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.cli import main as cli

OLD_DB = Path(__file__).parents[1] / "data" / "deliveries-v3-attempting.db"
PREFIX = "♻️ Recovered reply"

# (chat, state, attempts, owner, content) of each row, as the old log's own ledger listed them
OLD_LEDGER = [
    ("1", "delivered", 1, "old", "delivered reply"),
    ("2", "failed", 1, "old", "failed reply"),
    ("3", "unknown", 1, "old", "unknown reply"),
    ("4", "attempting", 1, "old", "interrupted reply"),
]


@pytest.fixture
def copied(tmp_path):
    copied = tmp_path / "old.db"
    shutil.copy(OLD_DB, copied)
    return copied


@pytest.fixture
def old(copied):
    clock = ManualClock("2026-03-01T11:00:00+00:00")  # an hour after the old log's turns
    with Turnlog(str(copied), clock=clock, session_ids=SequentialIds(), owner="new") as t:
        yield t


def turn_rows(t):
    return [(r.chat_id, r.state, r.attempts, r.owner, r.content) for r in t.ledger() if r.chat_id != "5"]


def test_an_old_logs_ledger_reads_as_it_did_from_the_read_model_and_the_log(old):
    assert turn_rows(old) == OLD_LEDGER
    [command] = [r for r in old.ledger() if r.chat_id == "5"]
    assert (command.state, command.attempts) == ("pending", 0) and command.content
    # time travel replays the Delivery aggregates themselves (a session's: not the command's answer)
    then = old.at(old.maintenance.log_head()).ledger()
    assert sorted((d["state"], d["attempts"], d["owner"], d["content"]) for d in then) == \
        sorted(row[1:] for row in OLD_LEDGER)
    # the old events read at the current version: no first attempt of their own
    assert {e.class_version for e in events(old, "DeliveryRecorded")} == {4}
    assert all(e.attempting_owner is None and e.attempt is None for e in events(old, "DeliveryRecorded"))
    assert len(events(old, "DeliveryAttempting")) == 4
    assert old.maintenance.verify()["ok"]


def test_an_old_log_verifies_its_chain_after_new_turns(old, copied):
    source = SessionSource(platform="telegram", chat_type="dm", chat_id="1", user_id="1", message_id="a2")
    old.handle_message(source, "again", lambda history, item: "a new reply", lambda text: None)
    new = events(old, "DeliveryRecorded")[-1]
    assert (new.attempting_owner, new.attempt) == ("new", 1)  # recorded already attempting
    assert turn_rows(old)[-1] == ("1", "delivered", 1, "new", "a new reply")
    assert old.maintenance.verify()["ok"]
    old.close()
    chain = CliRunner().invoke(cli, ["--db", str(copied), "verify", "--chain"], env={"TURNLOG_DB": None})
    assert (chain.exit_code, chain.output) == (0, "chain: ok\n")


def test_an_old_logs_owed_replies_are_resent_once_with_the_prefix(old, on_another_host):
    old.start_gateway("old")  # the old gateway's next boot: its interrupted turn is recovered
    sent = []
    report = old.sweep_deliveries(lambda target, text: sent.append((target["chat_id"], text)))
    assert sorted(chat for chat, _ in sent) == ["2", "3", "4", "5"] and len(report.delivered) == 4
    assert all(text.startswith(PREFIX) for chat, text in sent if chat in ("2", "3", "4"))
    assert dict(sent)["4"].endswith("\n\ninterrupted reply")
    assert [(r.chat_id, r.state, r.attempts, r.recovered) for r in old.ledger() if r.chat_id in ("2", "3", "4")] == \
        [("2", "delivered", 2, True), ("3", "delivered", 2, True), ("4", "delivered", 2, True)]
    assert old.sweep_deliveries(lambda target, text: sent.append(text)).delivered == []
