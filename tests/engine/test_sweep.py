"""The startup ledger sweep (docs/behaviour.md §6.2): owed replies of gone boots are re-sent, at most 3 attempts in all.

Rows owned by a boot that is gone are claimed (one more attempt) and re-sent with the "Recovered
reply" prefix; after the third attempt a row is dead-lettered, and so is a row older than 24 hours. A
platform that is not connected is skipped without spending an attempt.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path


from harness import never_called, procs
from harness.adapter import TURN_KILLED_IN_SEND, read_sent
from harness.log import events
from turnlog import ManualClock, SessionSource, Turnlog

from chat import collect, reply_with

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
PREFIX = "♻️ Recovered reply"
GW = "main"


def boot(db: Path, minutes: float) -> Turnlog:
    return Turnlog(db, clock=ManualClock(T0 + timedelta(minutes=minutes)))


def source(platform: str, chat_id: str, message_id: str | None = None) -> SessionSource:
    return SessionSource(platform=platform, chat_type="dm", chat_id=chat_id, user_id=chat_id, message_id=message_id)


def refuse(text):
    raise ConnectionError("platform API unavailable")


# The child sends through the fake adapter (one fsynced line per send) and is killed inside the send.
SWEEP_KILLED_IN_SEND = """
from harness.adapter import FakeAdapter
adapter = FakeAdapter(kit.work / "sent.jsonl")
t = kit.turnlog()
t.start_gateway("main")
def send(target, text):
    adapter.sweep_send(target, text)
    kit.ready(boot=t.owner)
    kit.hang()
t.sweep_deliveries(send)
kit.ready(boot=t.owner, swept=False)
kit.hang()
"""


def test_a_reply_of_a_gone_boot_is_resent_until_its_third_attempt_then_dead_lettered(db, tmp_path):
    procs.crash(db, TURN_KILLED_IN_SEND, at=T0)  # attempt 1: sent, then killed before it was recorded
    second = procs.crash(db, SWEEP_KILLED_IN_SEND, at=T0 + timedelta(minutes=2))  # attempt 2
    assert "swept" not in second.data
    third = procs.crash(db, SWEEP_KILLED_IN_SEND, at=T0 + timedelta(minutes=4))  # attempt 3
    assert "swept" not in third.data
    t = boot(db, 6)
    [row] = t.ledger()
    assert (row.state, row.attempts, row.owner) == ("attempting", 3, third.data["boot"])

    t.start_gateway(GW)
    swept = t.sweep_deliveries(never_called)
    assert len(swept.dead) == 1 and swept.delivered == [] and swept.abandoned == []
    [row] = t.ledger()
    assert (row.state, row.attempts) == ("dead", 3)
    assert t.sweep_deliveries(never_called).dead == []

    sent, torn = read_sent(tmp_path / "sent.jsonl")
    assert torn == []
    texts = [line["text"] for line in sent]
    assert texts[0] == "deployed to production"
    assert len(texts) == 3 and all(x.startswith(PREFIX) and x.endswith("deployed to production") for x in texts[1:])
    assert [line["via"] for line in sent] == ["turn", "sweep", "sweep"]
    [dead] = events(t, "DeliveryDeadLettered")
    assert dead.reason == "max_attempts"
    assert [row.delivery_id for row in t.status(GW).dead_deliveries] == [row.delivery_id]


def test_failed_resends_count_toward_the_three_attempts(db):
    first = boot(db, 0)
    first.start_gateway(GW)
    first.handle_message(source("telegram", "42", "m1"), "ping", reply_with("pong"), refuse)
    first.stop_gateway()
    [row] = first.ledger()
    assert (row.state, row.attempts) == ("failed", 1)

    t = boot(db, 5)
    t.start_gateway(GW)
    calls = []

    def still_down(target, text):
        calls.append(text)
        refuse(text)

    assert len(t.sweep_deliveries(still_down).failed) == 1
    assert len(t.sweep_deliveries(still_down).dead) == 1
    [row] = t.ledger()
    assert (row.state, row.attempts) == ("dead", 3)
    assert len(calls) == 2 and all(c.startswith(PREFIX) and c.endswith("pong") for c in calls)
    assert t.sweep_deliveries(never_called).dead == []


def test_a_row_older_than_24_hours_is_dead_lettered_unsent(db):
    first = boot(db, 0)
    first.start_gateway(GW)
    first.handle_message(source("telegram", "1", "a1"), "old question", reply_with("old answer"), refuse)
    first._clock.advance(hours=2)
    first.handle_message(source("telegram", "2", "b1"), "newer question", reply_with("newer answer"), refuse)
    first.stop_gateway()

    t = Turnlog(db, clock=ManualClock(T0 + timedelta(hours=24, seconds=1)))
    t.start_gateway(GW)
    sent = []
    swept = t.sweep_deliveries(lambda target, text: sent.append((target["chat_id"], text)))
    assert len(swept.dead) == 1 and len(swept.delivered) == 1
    assert [(chat, text.split("\n\n", 1)[1]) for chat, text in sent] == [("2", "newer answer")]
    states = {r.chat_id: (r.state, r.attempts) for r in t.ledger()}
    assert states == {"1": ("dead", 1), "2": ("delivered", 2)}
    assert [e.reason for e in events(t, "DeliveryDeadLettered")] == ["too_old"]


def test_a_row_exactly_24_hours_old_is_still_delivered(db):
    first = boot(db, 0)
    first.start_gateway(GW)
    first.handle_message(source("telegram", "1", "a1"), "question", reply_with("answer"), refuse)
    first.stop_gateway()
    t = Turnlog(db, clock=ManualClock(T0 + timedelta(hours=24)))
    t.start_gateway(GW)
    assert len(t.sweep_deliveries(lambda target, text: None).delivered) == 1


def test_the_platform_filter_skips_rows_without_spending_an_attempt(db):
    first = boot(db, 0)
    first.start_gateway(GW)
    first.handle_message(source("telegram", "1", "a1"), "hi", reply_with("from telegram"), refuse)
    first.handle_message(source("discord", "2", "b1"), "hi", reply_with("from discord"), refuse)
    first.stop_gateway()

    t = boot(db, 5)
    t.start_gateway(GW)
    sent = []
    for _ in range(5):  # Telegram stays disconnected for several sweeps
        swept = t.sweep_deliveries(lambda target, text: sent.append(target["platform"]), platforms={"discord"})
        assert len(swept.skipped) <= 1
    assert sent == ["discord"]
    telegram = next(r for r in t.ledger() if r.platform == "telegram")
    assert (telegram.state, telegram.attempts) == ("failed", 1)
    assert len(t.sweep_deliveries(lambda target, text: sent.append(target["platform"]),
                                  platforms={"telegram"}).delivered) == 1
    assert sent == ["discord", "telegram"]
    telegram = next(r for r in t.ledger() if r.platform == "telegram")
    assert (telegram.state, telegram.attempts) == ("delivered", 2)


def test_a_delivered_row_is_never_sent_again_by_later_boots(db):
    procs.crash(db, TURN_KILLED_IN_SEND, at=T0)
    t = boot(db, 2)
    t.start_gateway(GW)
    sent = []
    assert len(t.sweep_deliveries(collect(sent)).delivered) == 1
    t.stop_gateway()
    for minutes in (4, 6, 8):
        later = boot(db, minutes)
        later.start_gateway(GW)
        assert later.sweep_deliveries(never_called).delivered == []
        later.stop_gateway()
        later.close()
    assert len(sent) == 1


def test_a_sweep_for_some_bot_accounts_leaves_the_other_accounts_rows_owed(db):
    first = boot(db, 0)
    first.start_gateway(GW)
    for account in ("bot_a", "bot_b", None):
        bot_source = SessionSource(platform="weixin", chat_type="dm", chat_id="u1", user_id="u1", account_id=account)
        first.handle_message(bot_source, f"hi {account}", reply_with(f"to {account}"), refuse)
    first.close()
    again = boot(db, 2)
    again.start_gateway(GW)
    targets: list[dict] = []
    swept = again.sweep_deliveries(lambda target, text: targets.append(target), accounts={"bot_a", None})
    assert sorted(str(t["account_id"]) for t in targets) == ["None", "bot_a"]
    assert len(swept.delivered) == 2 and len(swept.skipped) == 1
    assert [row.state for row in again.ledger() if row.session_key.endswith(":bot_b:u1")] == ["failed"]
