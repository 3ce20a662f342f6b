"""discord.py in front of turnlog: messages deduplicated by their id, turns run under turnlog's
lease after the message is accepted, replies sent through the ledger.

    client = discord.Client(intents=intents)
    TurnlogDiscord(turnlog.open("gateway.db"), agent).attach(client)
    client.run(TOKEN)

Dedup: a message's snowflake id is unique across Discord for ever, so it is the source's
message_id; when the gateway connection RESUMEs it replays the events missed meanwhile, and a
message seen before is refused by turnlog's message-id dedup instead of answered twice.

Sends: Discord answered a 4xx (HTTPException): nothing was posted, a plain failure. A 5xx
(DiscordServerError), a timeout or a connection dropped after the request was written may have
posted: SendOutcomeUnknown, so the ledger records `unknown`. Unlike Telegram's Bot API, a bot can
read its channel's history, so the default `reconcile` looks for the text among the bot's last
messages there.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import discord

from turnlog import SendOutcomeUnknown, SessionSource

from .gateway import BotGateway, classifying

PLATFORM = "discord"
HISTORY_LIMIT = 20  # how many of the channel's last messages reconcile reads
# Failures before a request was written: nothing reached Discord.
NOT_SENT = (aiohttp.ClientConnectorError,)
MAY_HAVE_POSTED = (discord.DiscordServerError, TimeoutError, asyncio.TimeoutError, aiohttp.ServerDisconnectedError,
                   aiohttp.ClientOSError, aiohttp.ClientPayloadError)


class DiscordSendFailed(RuntimeError):
    """A send that certainly did not reach Discord (the ledger may resend it as it is)."""


def source_of(message: Any, account_id: str | None = None) -> SessionSource | None:
    """The SessionSource of a discord.Message (None for one without text)."""
    if not message.content:
        return None
    channel = message.channel
    parent_id = getattr(channel, "parent_id", None)  # set on a thread: its channel
    guild = message.guild
    if guild is None:
        chat_type, chat_id, thread_id = "dm", str(channel.id), None
    elif parent_id is not None:
        chat_type, chat_id, thread_id = "thread", str(parent_id), str(channel.id)
    else:
        chat_type, chat_id, thread_id = "group", str(channel.id), None
    author = message.author
    return SessionSource(
        platform=PLATFORM, chat_id=chat_id, chat_name=getattr(channel, "name", None), chat_type=chat_type,
        user_id=str(author.id), user_name=getattr(author, "name", None), thread_id=thread_id,
        is_bot=bool(getattr(author, "bot", False)), scope_id=str(guild.id) if guild is not None else None,
        message_id=str(message.id), account_id=account_id,
    )


def as_send_outcome(failure: BaseException) -> BaseException:
    """SendOutcomeUnknown when the send may have posted, DiscordSendFailed when it cannot have,
    else the failure itself (Discord answered: nothing was posted)."""
    if isinstance(failure, NOT_SENT):
        return DiscordSendFailed(f"{type(failure).__name__}: {failure} (before the request was written)")
    if isinstance(failure, MAY_HAVE_POSTED):
        return SendOutcomeUnknown(f"the send may have reached Discord: {type(failure).__name__}: {failure}")
    if isinstance(failure, discord.HTTPException):
        return DiscordSendFailed(f"Discord refused the send: {failure}")
    return failure


async def send_text(channel: Any, text: str) -> Any:
    """channel.send, its failures mapped for the ledger (as_send_outcome)."""
    with classifying(as_send_outcome):
        return await channel.send(text)


class TurnlogDiscord(BotGateway):
    """One Discord bot in front of one Turnlog (BotGateway: agent, gateway, reconcile,
    account_id; without a reconcile hook, unknown sends are looked for in the channel's history).
    The keys carry the bot's user id (`client.user.id`) as their account."""

    platform = PLATFORM

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.client: Any = None
        if self.reconcile is None:
            self.reconcile = self.reconcile_history

    def attach(self, client: Any) -> Any:
        """Handle the client's messages; start the gateway when it is first ready."""
        self.client = client
        client.event(self.on_message)
        client.event(self.on_ready)
        return client

    async def on_message(self, message: Any) -> None:
        if self.client is not None and message.author == self.client.user:
            return  # the bot's own replies
        self._know_bot()
        source = source_of(message, self.account_id)
        if source is None:
            return
        await self.take(source, message.content, self.send_to)  # a RESUME's replay is refused

    async def on_ready(self) -> None:
        self._know_bot()
        if self.boot is None:  # on_ready fires again after a reconnect; the gateway starts once
            await self.start(self.send_to)

    async def send_to(self, target: dict[str, Any], text: str) -> None:
        await send_text(await self._channel(target.get("thread_id") or target["chat_id"]), text)

    async def reconcile_history(self, target: dict[str, Any], attempt: Any) -> bool | None:
        """Is the attempt's text among the bot's last messages in the channel? None when the
        history cannot be read."""
        try:
            channel = await self._channel(target.get("thread_id") or target["chat_id"])
            async for message in channel.history(limit=HISTORY_LIMIT):
                if message.author == self.client.user and message.content == attempt.text:
                    return True
        except discord.HTTPException:
            return None
        return False

    def _know_bot(self) -> None:
        user = getattr(self.client, "user", None)  # set once the client logged in
        if user is not None:
            self.bot_id = user.id

    async def _channel(self, ident: str) -> Any:
        channel = self.client.get_channel(int(ident))
        return channel if channel is not None else await self.client.fetch_channel(int(ident))


__all__ = ["DiscordSendFailed", "PLATFORM", "TurnlogDiscord", "as_send_outcome", "send_text", "source_of"]
