"""python-telegram-bot (21+) in front of turnlog: every update accepted durably before its
handler returns, its turn run after under turnlog's lease, its reply sent through the ledger.

    bot = TurnlogTelegram(turnlog.open("gateway.db"), agent)
    app = bot.build(Application.builder().token(TOKEN))
    app.run_polling()

Dedup: the message id of an update is `f"tg{message.message_id}"`. Telegram numbers messages per
chat and never reuses a number, and the routing key holds the chat, so it names one message for
ever; a redelivered update (a getUpdates offset not yet confirmed when the bot died, a webhook
retry) carries the same message and is refused by turnlog's message-id dedup. The update_id would
do as well within a week, but Telegram restarts it at random after a week without updates.

Sends: a `TimedOut` or `NetworkError` after the request went out may have reached the chat, so it
is raised as SendOutcomeUnknown and the ledger records the reply `unknown`, never resending it
blindly; a failure before anything was written (connect or pool timeout, connect error) or an
answer from Telegram (BadRequest, Forbidden, RetryAfter) is a plain failure.

Reconciling: the Bot API cannot list the bot's own messages in a chat, so the adapter cannot ask
Telegram whether an unknown send arrived. Pass `reconcile(target, attempt)` when the deployment
can tell (a relay or proxy that logs what reached Telegram, a user-account client); without it
the `telegram` entry of `EngineConfig.unknown_send_policy` decides: "resend" (with the
recovered-reply prefix: the user may see the reply twice, marked) or "hold" (an operator settles
it with `turnlog ledger retry|abandon`).
"""

from __future__ import annotations

from typing import Any

import httpx
from telegram import Bot, Update
from telegram.error import BadRequest, NetworkError, TimedOut
from telegram.ext import Application, ApplicationBuilder, ContextTypes, MessageHandler, filters

from turnlog import SendOutcomeUnknown, SessionSource

from .gateway import BotGateway, SendTo, classifying

PLATFORM = "telegram"
MESSAGE_ID_PREFIX = "tg"
# Telegram's chat types, in turnlog's words ("private" is a DM; a supergroup is a group).
CHAT_TYPES = {"private": "dm", "group": "group", "supergroup": "group", "channel": "channel"}
# Failures of the HTTP client that happen before a request is written: nothing reached Telegram.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


class TelegramSendFailed(RuntimeError):
    """A send that certainly did not reach Telegram (the ledger may resend it as it is)."""


def source_of(update: Update, account_id: str | None = None) -> SessionSource | None:
    """The SessionSource of an update's message (None for an update without a text message)."""
    message = update.effective_message
    chat = update.effective_chat
    if message is None or chat is None or message.text is None:
        return None
    user = update.effective_user
    thread = message.message_thread_id if message.is_topic_message else None
    return SessionSource(
        platform=PLATFORM, chat_id=str(chat.id), chat_name=chat.title or chat.full_name,
        chat_type=CHAT_TYPES.get(chat.type, chat.type),
        user_id=str(user.id) if user else None,
        user_name=(user.username or user.full_name) if user else None,
        thread_id=str(thread) if thread is not None else None,
        is_bot=bool(user and user.is_bot),
        message_id=f"{MESSAGE_ID_PREFIX}{message.message_id}", account_id=account_id,
    )


def as_send_outcome(failure: BaseException) -> BaseException:
    """What the ledger should see of a failed send_message: SendOutcomeUnknown when the request
    may have reached Telegram, TelegramSendFailed when it cannot have, else the failure itself."""
    if isinstance(failure, BadRequest) or not isinstance(failure, NetworkError):
        return failure  # Telegram answered (BadRequest, Forbidden, RetryAfter...): nothing was posted
    if isinstance(failure.__cause__, NOT_SENT):
        return TelegramSendFailed(f"{type(failure).__name__}: {failure} (before the request was written)")
    what = "timed out" if isinstance(failure, TimedOut) else "failed"
    return SendOutcomeUnknown(f"sendMessage {what} after the request may have reached Telegram: {failure}")


async def send_text(bot: Bot, chat_id: str, text: str, thread_id: str | None = None) -> Any:
    """bot.send_message, its failures mapped for the ledger (as_send_outcome)."""
    with classifying(as_send_outcome):
        return await bot.send_message(chat_id=int(chat_id), text=text,
                                      message_thread_id=int(thread_id) if thread_id else None)


class TurnlogTelegram(BotGateway):
    """One Telegram bot in front of one Turnlog (BotGateway: agent, gateway, reconcile,
    account_id). The keys carry the bot's user id (`bot.id`, from getMe at initialize) as their
    account, so two bots of one gateway keep one user's conversations apart."""

    platform = PLATFORM

    def handler(self) -> MessageHandler:
        """The PTB handler of new text messages: accept, then run the turn in a task of its own.
        An edit keeps its message's id, so it is not taken for a new message (nor refused as one)."""
        return MessageHandler(filters.UpdateType.MESSAGE & filters.TEXT, self.on_update)

    def build(self, builder: ApplicationBuilder) -> Application:
        """An Application with this handler, starting the gateway (recovery, sweep, resume) on init
        and stopping it cleanly on shutdown."""
        app = builder.post_init(self.on_start).post_shutdown(self.on_stop).build()
        app.add_handler(self.handler())
        return app

    async def on_update(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        self.bot_id = context.bot.id  # known since the Application's initialize (getMe)
        source = source_of(update, self.account_id)
        if source is None or update.effective_message is None:
            return
        # Accepted durably, the turn in a task: the handler returns, polling goes on meanwhile.
        await self.take(source, update.effective_message.text or "", sender(context.bot))

    async def on_start(self, app: Application) -> None:
        self.bot_id = app.bot.id
        await self.start(sender(app.bot))

    async def on_stop(self, app: Application) -> None:
        await self.stop()


def sender(bot: Bot) -> SendTo:
    async def send_to(target: dict[str, Any], text: str) -> None:
        await send_text(bot, target["chat_id"], text, target.get("thread_id"))
    return send_to


__all__ = ["CHAT_TYPES", "PLATFORM", "TelegramSendFailed", "TurnlogTelegram", "as_send_outcome", "send_text",
           "sender", "source_of"]
