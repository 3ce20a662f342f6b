"""The Telegram adapter's rules, with python-telegram-bot's own types and no network: the source
of an update, and what each failure of sendMessage means to the ledger."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("telegram")

import httpx  # noqa: E402
from telegram import Bot, Update  # noqa: E402
from telegram.error import BadRequest, NetworkError, TimedOut  # noqa: E402

import turnlog  # noqa: E402
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
    return "unused"


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
