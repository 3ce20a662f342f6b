"""Several bot accounts on one platform (docs/behaviour.md §2.8, §12.1): one person talking to two of
the gateway's bots has two conversations, and a route keyed before its account was known moves to
the account by the rules of the Slack workspace migration."""

from __future__ import annotations

import shutil
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from turnlog import InvalidRequest, ManualClock, SequentialIds, SessionSource, Turnlog

from chat import collect, echo


def weixin(account: str | None, user: str = "wxid_u1", **fields: Any) -> SessionSource:
    return SessionSource(platform="weixin", chat_type="dm", chat_id=user, user_id=user, account_id=account, **fields)


def telegram_group(account: str | None, user: str = "42") -> SessionSource:
    return SessionSource(platform="telegram", chat_type="group", chat_id="-100123", user_id=user, account_id=account)


def test_one_wechat_user_and_two_accounts_give_two_sessions_that_do_not_mix(t):
    sent: list[str] = []

    first, = t.handle_message(weixin("bot_a"), "hello a", echo, collect(sent))
    second, = t.handle_message(weixin("bot_b"), "hello b", echo, platform_down)

    assert first.session_id != second.session_id
    assert [m["content"] for m in t.transcript(first.session_id)] == ["hello a", "re: hello a"]
    assert [m["content"] for m in t.transcript(second.session_id)] == ["hello b", "re: hello b"]
    assert t.session(weixin("bot_a")).session_id == first.session_id
    # a reply owed again goes back through the account its message arrived on
    resent: list[tuple[Any, str]] = []
    t.sweep_deliveries(lambda target, text: resent.append((target["account_id"], text)))
    assert sent == ["re: hello a"]
    assert [(account, text.endswith("re: hello b")) for account, text in resent] == [("bot_b", True)]


def platform_down(text: str) -> None:
    raise ConnectionError("platform down")


def test_one_telegram_user_and_two_bots_give_two_sessions(t):
    dm = [t.get_or_create_session(SessionSource(platform="telegram", chat_id="42", user_id="42", account_id=bot))
          for bot in ("7001", "7002")]
    group = [t.get_or_create_session(telegram_group(bot)) for bot in ("7001", "7002")]

    assert [r.session_key for r in dm] == ["agent:main:telegram:dm:7001:42", "agent:main:telegram:dm:7002:42"]
    assert len({r.session_id for r in dm + group}) == 4 and all(r.created for r in dm + group)


def test_a_dm_keyed_without_an_account_is_claimed_by_the_first_account(t):
    old = t.get_or_create_session(weixin(None))
    assert old.session_key == "agent:main:weixin:dm:wxid_u1"

    moved = t.get_or_create_session(weixin("bot_a", message_id="m2"))

    assert moved.session_key == "agent:main:weixin:dm:bot_a:wxid_u1"
    assert (moved.session_id, moved.created, moved.reason) == (old.session_id, False, "account_migration")
    routes = {r.session_key: r.session_id for r in t.routes()}
    assert routes == {"agent:main:weixin:dm:wxid_u1": None, "agent:main:weixin:dm:bot_a:wxid_u1": old.session_id}
    moves = [(h.event, h.actor, h.cause, h.data["reason"]) for h in t.history(old.session_id)
             if h.event in ("RouteDetached", "RouteRegistered", "RouteBound")]
    # the account's new route is registered already bound to the session it takes over
    assert moves[-2:] == [("RouteDetached", "weixin:user:wxid_u1", "message:m2", "account_migration"),
                          ("RouteRegistered", "weixin:user:wxid_u1", "message:m2", "account_migration")]


def test_a_second_account_gets_a_dm_session_of_its_own(t):
    old = t.get_or_create_session(weixin(None))
    t.get_or_create_session(weixin("bot_a"))

    other = t.get_or_create_session(weixin("bot_b"))

    assert other.created and other.session_id != old.session_id and other.reason == "first_message"
    assert t.get_or_create_session(weixin("bot_a")).session_id == old.session_id  # the move happened once


def test_a_group_keyed_without_an_account_never_moves(t):
    old = t.get_or_create_session(telegram_group(None))

    keyed = t.get_or_create_session(telegram_group("7001"))

    assert keyed.created and keyed.session_id != old.session_id and keyed.reason == "first_message"
    routes = {r.session_key: r.session_id for r in t.routes()}
    assert routes["agent:main:telegram:group:-100123:42"] == old.session_id  # still where it was


def test_force_new_and_ended_sessions_are_not_adopted(t):
    old = t.get_or_create_session(weixin(None, user="u7"))
    t.command(weixin(None, user="u7"), "/new")

    fresh = t.get_or_create_session(weixin("bot_a", user="u7"))
    assert fresh.created and fresh.session_id != old.session_id

    kept = t.get_or_create_session(weixin(None, user="u8"))
    forced = t.get_or_create_session(weixin("bot_a", user="u8"), force_new=True)
    assert forced.created and forced.session_id != kept.session_id


def test_a_slack_dm_of_a_pre_workspace_gateway_moves_to_the_workspace_and_account(t):
    old = t.get_or_create_session(SessionSource(platform="slack", chat_id="D1"))

    moved = t.get_or_create_session(SessionSource(platform="slack", chat_id="D1", scope_id="T1", account_id="B1"))

    assert moved.session_key == "agent:main:slack:dm:T1:B1:D1"
    assert (moved.session_id, moved.reason) == (old.session_id, "slack_scope_migration")


def test_a_delivery_recorded_before_accounts_existed_still_loads(tmp_path):
    # tests/data/turns-v1-lease-acquired.db holds version-1 DeliveryRecorded events (no account_id).
    db = tmp_path / "old.db"
    shutil.copy(Path(__file__).parents[1] / "data" / "turns-v1-lease-acquired.db", db)
    with Turnlog(str(db), clock=ManualClock(), session_ids=SequentialIds()) as old:
        first = old.ledger()[0]
        with pytest.raises(InvalidRequest, match="is already delivered"):  # read back, state and all
            old.turns.deliver(uuid.UUID(first.delivery_id), lambda text: None)
        assert old.maintenance.verify()["ok"]


def test_two_accounts_racing_for_one_old_dm_split_it_once(make_turnlog):
    ids = SequentialIds()
    gateways = [make_turnlog(owner="gateway-a", session_ids=ids), make_turnlog(owner="gateway-b", session_ids=ids)]
    for round_no in range(8):
        user = f"u{round_no}"
        old = gateways[0].get_or_create_session(weixin(None, user=user))
        start = threading.Barrier(2)
        results: dict[str, Any] = {}

        def claim(gateway, account: str) -> None:
            start.wait(timeout=30)
            results[account] = gateway.get_or_create_session(weixin(account, user=user))

        threads = [threading.Thread(target=claim, args=(g, a)) for g, a in zip(gateways, ("bot_a", "bot_b"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)

        assert sorted((r.session_id == old.session_id, r.reason) for r in results.values()) == [
            (False, "first_message"), (True, "account_migration")], f"round {round_no}"
