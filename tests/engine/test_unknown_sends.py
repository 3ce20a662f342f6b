"""Sends of unknown outcome (docs/behaviour.md §6.2): a send that may have reached the platform is
recorded `unknown` and reconciled before anything is resent; every delivery has one idempotency key."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from harness import procs
from harness.adapter import TURN_KILLED_IN_SEND, read_sent
from harness.log import events
from turnlog import EngineConfig, InvalidRequest, ManualClock, SendOutcomeUnknown, SessionSource, Turnlog

from chat import reply_with

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
PREFIX = "♻️ Recovered reply"
GW = "main"


def boot(db: Path, minutes: float, **options) -> Turnlog:
    return Turnlog(db, clock=ManualClock(T0 + timedelta(minutes=minutes)), **options)


def source(message_id: str = "m1", platform: str = "telegram") -> SessionSource:
    return SessionSource(platform=platform, chat_type="dm", chat_id="42", user_id="42", message_id=message_id)


class Platform:
    """A chat that records what it received; `then_raise` makes a send fail after (or before) it arrived."""

    def __init__(self) -> None:
        self.received: list[str] = []

    def send_then_time_out(self, text: str) -> None:
        self.received.append(text)
        raise TimeoutError("read timed out after the request was written")

    def time_out_before(self, text: str) -> None:
        raise TimeoutError("read timed out; the platform never saw it")

    def sweep_send(self, target, text) -> None:
        self.received.append(text)

    def reconcile(self, target, attempt) -> bool:
        return attempt.text in self.received


def first_turn(db: Path, send, **options) -> Turnlog:
    t = boot(db, 0, **options)
    t.start_gateway(GW)
    t.handle_message(source(), "deploy?", reply_with("deployed"), send)
    t.stop_gateway()
    return t


def test_a_timeout_after_the_platform_got_it_is_reconciled_delivered_and_not_resent(db):
    chat = Platform()
    t = first_turn(db, chat.send_then_time_out)
    [row] = t.ledger()
    assert (row.state, row.attempts) == ("unknown", 1)
    assert "TimeoutError" in row.last_error

    later = boot(db, 5)  # a restart
    later.start_gateway(GW)
    swept = later.sweep_deliveries(chat.sweep_send, reconcile=chat.reconcile)
    assert swept.reconciled == [row.delivery_id] and swept.delivered == []
    assert chat.received == ["deployed"]  # once
    [row] = later.ledger()
    assert row.state == "delivered"
    assert [e.verdict for e in events(later, "DeliveryReconciled")] == ["delivered"]
    assert later.sweep_deliveries(chat.sweep_send, reconcile=chat.reconcile).to_dict() == {
        k: [] for k in swept.to_dict()}


def test_a_timeout_before_it_arrived_is_reconciled_not_delivered_and_sent_once_without_the_prefix(db):
    chat = Platform()
    first_turn(db, chat.time_out_before)
    later = boot(db, 5)
    later.start_gateway(GW)
    swept = later.sweep_deliveries(chat.sweep_send, reconcile=chat.reconcile)
    assert len(swept.delivered) == 1
    assert chat.received == ["deployed"]  # known not to have arrived: no "may be a duplicate" prefix
    assert [e.verdict for e in events(later, "DeliveryReconciled")] == ["not_delivered"]
    assert later.sweep_deliveries(chat.sweep_send, reconcile=chat.reconcile).delivered == []
    assert chat.received == ["deployed"]


def test_a_hook_that_cannot_tell_leaves_the_row_unknown_and_asks_again(db):
    chat = Platform()
    first_turn(db, chat.time_out_before)
    later = boot(db, 5)
    later.start_gateway(GW)
    swept = later.sweep_deliveries(chat.sweep_send, reconcile=lambda target, attempt: None)
    assert len(swept.unknown) == 1 and chat.received == []
    assert later.ledger()[0].state == "unknown"
    assert [e.verdict for e in events(later, "DeliveryReconciled")] == ["unknown"]


def test_without_a_hook_the_platform_policy_resends_with_the_prefix_or_holds(db, tmp_path):
    chat = Platform()
    first_turn(db, chat.send_then_time_out)
    later = boot(db, 5)
    later.start_gateway(GW)
    assert len(later.sweep_deliveries(chat.sweep_send).delivered) == 1
    assert chat.received[0] == "deployed" and chat.received[1].startswith(PREFIX)

    held_db = tmp_path / "held.db"
    config = EngineConfig(unknown_send_policy={"telegram": "hold", "*": "resend"})
    other = Platform()
    first_turn(held_db, other.send_then_time_out, config=config)
    again = boot(held_db, 5, config=config)
    again.start_gateway(GW)
    swept = again.sweep_deliveries(other.sweep_send)
    assert len(swept.held) == 1 and other.received == ["deployed"]
    assert again.ledger()[0].state == "unknown"
    assert again.ledger()[0].attempts == 1  # no attempt spent on a held row


def test_an_unknown_row_outliving_its_ttl_is_dead(db):
    chat = Platform()
    first_turn(db, chat.time_out_before)
    later = boot(db, 24 * 60 + 1)
    later.start_gateway(GW)
    assert len(later.sweep_deliveries(chat.sweep_send, reconcile=lambda t, a: None).dead) == 1
    assert later.ledger()[0].state == "dead" and chat.received == []


def test_what_counts_as_unknown(db, tmp_path):
    class ConnectTimeout(Exception):
        pass

    class TimedOut(Exception):  # python-telegram-bot's name for a read timeout
        pass

    cases = {"explicit": (SendOutcomeUnknown("the platform may have it"), "unknown"),
             "reset": (ConnectionResetError("reset by peer"), "unknown"),
             "named": (TimedOut("timed out"), "unknown"),
             "connect": (ConnectTimeout("never connected"), "failed"),
             "refused": (ConnectionRefusedError("down"), "failed"),
             "bad request": (ValueError("chat not found"), "failed")}
    for name, (failure, state) in cases.items():
        t = Turnlog(tmp_path / f"{name.replace(' ', '_')}.db", clock=ManualClock(T0))

        def send(text, failure=failure):
            raise failure
        [outcome] = t.handle_message(source(), "hi", reply_with("hello"), send)
        assert (name, outcome.delivery_state) == (name, state)


def test_every_attempt_of_a_delivery_carries_its_one_idempotency_key(db):
    keys = []

    def keyed(text, idempotency_key):
        keys.append(idempotency_key)
        raise ConnectionRefusedError("down")
    t = boot(db, 0)
    t.start_gateway(GW)
    t.handle_message(source(), "deploy?", reply_with("deployed"), keyed)
    t.stop_gateway()
    [row] = t.ledger()
    later = boot(db, 5)
    later.start_gateway(GW)
    targets = []
    later.sweep_deliveries(lambda target, text: targets.append(target))
    attempt = later.turns.attempt_delivery
    assert keys == [f"turnlog-{row.delivery_id}"] and targets[0]["idempotency_key"] == keys[0]
    with pytest.raises(InvalidRequest):
        attempt(__import__("uuid").UUID(row.delivery_id))  # delivered by the sweep: nothing to attempt




def test_killed_between_the_send_and_its_record_the_reply_is_reconciled_not_resent(db, tmp_path):
    procs.crash(db, TURN_KILLED_IN_SEND, at=T0)
    t = boot(db, 5)
    t.start_gateway(GW)
    [row] = t.ledger()
    assert row.state == "attempting"  # by the killed boot: whether its send happened is unknown

    def reconcile(target, attempt):
        sent, _ = read_sent(tmp_path / "sent.jsonl")
        return any(line["text"] == attempt.text for line in sent)

    swept = t.sweep_deliveries(lambda target, text: pytest.fail("resent a reply the chat already has"),
                               reconcile=reconcile)
    assert swept.reconciled == [row.delivery_id]
    sent, torn = read_sent(tmp_path / "sent.jsonl")
    assert torn == [] and [line["text"] for line in sent] == ["deployed to production"]
    assert t.ledger()[0].state == "delivered"
    assert [e.verdict for e in events(t, "DeliveryReconciled")] == ["delivered"]
    assert len(events(t, "DeliveryMarkedUnsure")) == 1


def test_the_asyncio_api_passes_the_key_and_awaits_an_async_reconcile(db):
    import asyncio

    from turnlog.aio import AsyncTurnlog

    keys, chat = [], []

    async def send(text, idempotency_key):
        keys.append(idempotency_key)
        chat.append(text)
        raise TimeoutError("read timed out after the request was written")

    async def agent(history, item):
        return "deployed"

    async def reconcile(target, attempt):
        await asyncio.sleep(0)
        return attempt.text in chat

    async def main():
        t = AsyncTurnlog(boot(db, 0))
        await t.start_gateway(GW)
        await t.handle_message(source(), "deploy?", agent, send)
        later = AsyncTurnlog(boot(db, 5))
        await later.start_gateway(GW)
        return await later.sweep_deliveries(lambda target, text: chat.append(text), reconcile=reconcile)

    swept = asyncio.run(main())
    assert len(swept.reconciled) == 1 and chat == ["deployed"]
    assert keys == [f"turnlog-{swept.reconciled[0]}"]


def test_a_send_made_for_each_message_is_given_the_key_it_asks_for(db):
    """Gateways often make a new closure per message: whether it takes `idempotency_key` is
    read from each one (a decorated send is read through its wrapper to what it wraps)."""
    keyed, plain = [], []

    def keyed_send_for(chat):
        def send(text, idempotency_key):
            keyed.append((chat, idempotency_key))
        return send

    def logged(send):
        @functools.wraps(send)
        def wrapper(*args, **kwargs):
            return send(*args, **kwargs)
        return wrapper

    t = boot(db, 0)
    for n in range(3):
        t.handle_message(source(f"k{n}"), f"hi {n}", reply_with("ok"), keyed_send_for(n))
    t.handle_message(source("p1"), "plain", reply_with("ok"), logged(lambda text: plain.append(text)))
    ids = [row.delivery_id for row in t.ledger()]
    assert [chat for chat, _ in keyed] == [0, 1, 2]
    assert {key for _, key in keyed} <= {f"turnlog-{i}" for i in ids} and len({k for _, k in keyed}) == 3
    assert plain == ["ok"]  # not given a keyword it cannot take
