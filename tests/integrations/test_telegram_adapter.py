"""The Telegram adapter's rules, with python-telegram-bot's own types and no network: the source
of an update, and what each failure of sendMessage means to the ledger."""

from __future__ import annotations

import asyncio
from typing import Any, Iterator

import pytest

pytest.importorskip("telegram")

import httpx  # noqa: E402
from telegram import Bot, Update  # noqa: E402
from telegram.error import BadRequest, NetworkError, TimedOut  # noqa: E402

from telegram.ext import Application  # noqa: E402

import turnlog  # noqa: E402
from integrations.fake_bot_api import BOT as FIRST_BOT, TOKEN, FakeBotApi  # noqa: E402
from turnlog.integrations.telegram import TelegramSendFailed, TurnlogTelegram, as_send_outcome, source_of  # noqa: E402

BOT = Bot("123456:TEST-not-a-real-token", base_url="http://127.0.0.1:9/bot")


def update(chat: dict[str, Any], **message: Any) -> Update:
    data = {"update_id": 7, "message": {"message_id": 31, "date": 0, "text": "hi", "chat": chat,
                                        "from": {"id": 42, "is_bot": False, "first_name": "Alice",
                                                 "username": "alice"}, **message}}
    parsed = Update.de_json(data, BOT)
    assert parsed is not None
    return parsed


async def agent(history: Any, item: Any) -> str:
    return f"echo: {item.text}"


def chained(failure: BaseException, cause: BaseException) -> BaseException:
    failure.__cause__ = cause
    return failure


def test_the_source_of_a_private_message() -> None:
    source = source_of(update({"id": 42, "type": "private", "first_name": "Alice"}))
    assert source is not None
    assert (source.platform, source.chat_type, source.chat_id, source.user_id, source.user_name) == \
        ("telegram", "dm", "42", "42", "alice")
    assert source.message_id == "tg31" and source.thread_id is None


def test_the_source_of_a_forum_topic_message() -> None:
    source = source_of(update({"id": -100, "type": "supergroup", "title": "Team", "is_forum": True},
                              message_thread_id=5, is_topic_message=True))
    assert source is not None
    assert (source.chat_type, source.chat_id, source.chat_name, source.thread_id) == ("group", "-100", "Team", "5")


def test_an_update_without_text_has_no_source() -> None:
    assert source_of(update({"id": 42, "type": "private"}, text=None, sticker=None)) is None


@pytest.mark.parametrize("failure", [
    chained(TimedOut(), httpx.ReadTimeout("read")),
    chained(TimedOut(), httpx.WriteTimeout("write")),
    chained(NetworkError("httpx.RemoteProtocolError: disconnected"), httpx.RemoteProtocolError("disconnected")),
], ids=["read-timeout", "write-timeout", "disconnected"])
def test_a_failure_after_the_request_went_out_is_unknown(failure: BaseException) -> None:
    assert isinstance(as_send_outcome(failure), turnlog.SendOutcomeUnknown)


@pytest.mark.parametrize("failure", [
    chained(TimedOut(), httpx.ConnectTimeout("connect")),
    chained(TimedOut("Pool timeout"), httpx.PoolTimeout("pool")),
    chained(NetworkError("httpx.ConnectError: refused"), httpx.ConnectError("refused")),
], ids=["connect-timeout", "pool-timeout", "connect-error"])
def test_a_failure_before_the_request_was_written_is_a_plain_failure(failure: BaseException) -> None:
    assert isinstance(as_send_outcome(failure), TelegramSendFailed)


def test_an_answer_from_telegram_is_a_plain_failure() -> None:
    refused = BadRequest("Chat not found")
    assert as_send_outcome(refused) is refused


def test_the_handler_takes_new_text_messages_not_edits(t: turnlog.Turnlog) -> None:
    handler = TurnlogTelegram(t, agent).handler()
    chat = {"id": 42, "type": "private"}
    new = update(chat)
    edited = Update.de_json({"update_id": 8, "edited_message": {**new.to_dict()["message"], "edit_date": 1}}, BOT)
    assert handler.check_update(new)
    assert not handler.check_update(edited)


SECOND_BOT = {**FIRST_BOT, "id": 654321, "username": "turnlog_second_bot"}


async def serve_one(t: turnlog.Turnlog, api: FakeBotApi, text: str, **options: Any) -> None:
    """A TurnlogTelegram on the real python-telegram-bot, initialized against the fake Bot API
    (getMe), started, handed one update from alice, its turns awaited."""
    bot = TurnlogTelegram(t, agent, **options)
    app = bot.build(Application.builder().token(api.token).base_url(f"{api.base_url}/bot").updater(None))
    await app.initialize()
    try:
        await bot.on_start(app)
        await app.process_update(Update.de_json(api.push(len(api.updates) + 1, text), app.bot))
        while bot.tasks:
            await asyncio.gather(*bot.tasks)
    finally:
        await app.shutdown()


@pytest.fixture
def two_bots(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeBotApi, FakeBotApi]]:
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)  # httpx would send even a loopback request to a proxy
    with FakeBotApi() as first, FakeBotApi("654321:TEST-second-token", SECOND_BOT) as second:
        yield first, second


def test_one_user_talking_to_two_bots_has_two_sessions(t: turnlog.Turnlog, two_bots: Any) -> None:
    first, second = two_bots

    async def main() -> None:
        await serve_one(t, first, "hello first bot")
        await serve_one(t, second, "hello second bot")  # alice's chat id is the same with each bot
    asyncio.run(main())
    assert (first.texts(), second.texts()) == (["echo: hello first bot"], ["echo: hello second bot"])
    assert sorted(s.session_key for s in t.sessions()) == ["agent:main:telegram:dm:123456:42",
                                                           "agent:main:telegram:dm:654321:42"]


def test_account_id_false_keeps_the_key_of_a_one_bot_gateway(t: turnlog.Turnlog, two_bots: Any) -> None:
    asyncio.run(serve_one(t, two_bots[0], "hello", account_id=False))
    assert [s.session_key for s in t.sessions()] == ["agent:main:telegram:dm:42"]
