"""The discord.py adapter, driven without the network: messages shaped like discord.Message (the
library's own exception types for the failures), a channel that records what it was sent."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

discord = pytest.importorskip("discord")

import turnlog  # noqa: E402
from chat import echo  # noqa: E402
from turnlog.domain.delivery import RECOVERED_PREFIX  # noqa: E402
from turnlog.integrations.discord import TurnlogDiscord, as_send_outcome, source_of  # noqa: E402

BOT_USER = SimpleNamespace(id=1, name="turnlog-bot", bot=True)
AUTHOR = SimpleNamespace(id=42, name="alice", bot=False)


@dataclass
class Channel:
    id: int
    name: str = "general"
    parent_id: int | None = None
    sent: list[str] = field(default_factory=list)
    failures: list[BaseException] = field(default_factory=list)  # raised by the next sends, after recording

    async def send(self, text: str) -> Any:
        self.sent.append(text)
        if self.failures:
            raise self.failures.pop(0)
        return SimpleNamespace(id=9000 + len(self.sent), content=text, author=BOT_USER)

    async def history(self, limit: int) -> Any:
        for text in reversed(self.sent[-limit:]):
            yield SimpleNamespace(content=text, author=BOT_USER)


class Client:
    def __init__(self, *channels: Channel, user: Any = BOT_USER) -> None:
        self.user = user
        self.channels = {c.id: c for c in channels}
        self.events: dict[str, Any] = {}

    def event(self, handler: Any) -> Any:
        self.events[handler.__name__] = handler
        return handler

    def get_channel(self, ident: int) -> Channel | None:
        return self.channels.get(ident)


def message(ident: int, text: str, channel: Channel, *, guild: int | None = 7, author: Any = AUTHOR) -> Any:
    return SimpleNamespace(id=ident, content=text, channel=channel, author=author,
                           guild=SimpleNamespace(id=guild) if guild is not None else None)


async def agent(history: Any, item: Any) -> str:
    return echo(history, item)


def server_error() -> BaseException:
    return discord.DiscordServerError(SimpleNamespace(status=503, reason="Service Unavailable"), "try later")


def run(adapter: TurnlogDiscord, *messages: Any) -> None:
    async def main() -> None:
        for m in messages:  # each message's turns end before the next arrives
            await adapter.client.events["on_message"](m)
            await asyncio.gather(*adapter.tasks)
    asyncio.run(main())


def test_a_message_replayed_by_a_resume_runs_one_turn(t: turnlog.Turnlog) -> None:
    channel = Channel(100)
    adapter = TurnlogDiscord(t, agent)
    adapter.attach(Client(channel))
    hello = message(555, "hello", channel)
    run(adapter, hello, hello, message(556, "again", channel))
    assert channel.sent == ["re: hello", "re: again"]
    source = source_of(hello, account_id="1")  # the bot's user id
    assert source is not None and source.message_id == "555" and source.scope_id == "7"
    assert [f.message_id for f in t.message_fates(source)] == ["555", "556"]


def test_the_bot_ignores_its_own_messages(t: turnlog.Turnlog) -> None:
    channel = Channel(100)
    adapter = TurnlogDiscord(t, agent)
    adapter.attach(Client(channel))
    run(adapter, message(1, "a reply of mine", channel, author=BOT_USER))
    assert channel.sent == [] and t.ledger() == []


def test_sources_of_a_dm_and_a_thread() -> None:
    dm = source_of(message(1, "hi", Channel(5), guild=None))
    thread = source_of(message(2, "hi", Channel(6, parent_id=100)))
    assert dm is not None and (dm.chat_type, dm.chat_id, dm.thread_id) == ("dm", "5", None)
    assert thread is not None and (thread.chat_type, thread.chat_id, thread.thread_id) == ("thread", "100", "6")


def test_which_failures_may_have_posted() -> None:
    assert isinstance(as_send_outcome(server_error()), turnlog.SendOutcomeUnknown)
    assert isinstance(as_send_outcome(TimeoutError()), turnlog.SendOutcomeUnknown)
    refused = discord.Forbidden(SimpleNamespace(status=403, reason="Forbidden"), "Missing Access")
    assert not isinstance(as_send_outcome(refused), turnlog.SendOutcomeUnknown)


def test_a_send_that_may_have_posted_is_reconciled_from_the_history_not_reposted(
        make_turnlog: Any, clock: Any) -> None:
    channel = Channel(100, failures=[server_error()])
    first = make_turnlog(owner="boot-1")
    first.start_gateway("discord")
    adapter = TurnlogDiscord(first, agent)
    adapter.attach(Client(channel))
    run(adapter, message(555, "hello", channel))
    assert [row.state for row in first.ledger()] == ["unknown"]
    first.close()

    again = make_turnlog(owner="boot-2")
    restarted = TurnlogDiscord(again, agent)
    restarted.attach(Client(channel))
    asyncio.run(restarted.client.events["on_ready"]())
    assert restarted.swept is not None and len(restarted.swept.reconciled) == 1
    assert channel.sent == ["re: hello"]
    assert [row.state for row in again.ledger()] == ["delivered"]


def test_a_slash_command_is_handled_and_answered_once(t: turnlog.Turnlog) -> None:
    channel = Channel(100)
    adapter = TurnlogDiscord(t, agent)
    adapter.attach(Client(channel))
    new = message(560, "/new", channel)
    run(adapter, message(559, "hello", channel), new, new, message(561, "after", channel))
    assert channel.sent[0] == "re: hello" and channel.sent[2] == "re: after"
    assert len(channel.sent) == 3  # the /new notice once, though delivered twice
    assert len({s.session_id for s in t.sessions()}) == 2


def test_one_user_talking_to_two_bots_has_two_sessions(t: turnlog.Turnlog) -> None:
    channels = [Channel(100), Channel(100)]  # one DM channel id, seen by each bot's client
    bots = [TurnlogDiscord(t, agent), TurnlogDiscord(t, agent)]  # no account_id given
    for bot, channel, ident in zip(bots, channels, (1, 2)):
        bot.attach(Client(channel, user=SimpleNamespace(id=ident, name=f"bot-{ident}", bot=True)))
        asyncio.run(bot.client.events["on_ready"]())
    run(bots[0], message(700, "to the first", channels[0], guild=None))
    run(bots[1], message(701, "to the second", channels[1], guild=None))
    assert [c.sent for c in channels] == [["re: to the first"], ["re: to the second"]]
    sessions = t.sessions()
    assert len(sessions) == 2
    assert sorted(s.session_key for s in sessions) == ["agent:main:discord:dm:1:100", "agent:main:discord:dm:2:100"]


def test_an_explicit_account_wins_and_false_keeps_keys_without_one(t: turnlog.Turnlog) -> None:
    channel = Channel(100)
    named, plain = TurnlogDiscord(t, agent, account_id="main-bot"), TurnlogDiscord(t, agent, account_id=False)
    for bot in (named, plain):
        bot.attach(Client(channel))
    run(named, message(710, "hi", channel, guild=None))
    run(plain, message(711, "hi", channel, guild=None))
    assert sorted(s.session_key for s in t.sessions()) == ["agent:main:discord:dm:100",
                                                           "agent:main:discord:dm:main-bot:100"]


def test_a_command_answer_whose_send_failed_is_owed_and_sent_once_at_the_next_start(
        make_turnlog: Any) -> None:
    channel = Channel(100)
    first = make_turnlog(owner="boot-1")
    first.start_gateway("discord")
    adapter = TurnlogDiscord(first, agent)
    adapter.attach(Client(channel))
    run(adapter, message(719, "hello", channel))
    channel.failures.append(discord.Forbidden(SimpleNamespace(status=403, reason="Forbidden"), "not now"))
    run(adapter, message(720, "/status", channel))
    [owed] = [row for row in first.ledger() if row.seq == 0]  # a command answer stands outside the transcript
    assert (owed.state, owed.seq) == ("failed", 0) and owed.content.startswith("📊 Session status")
    first.close()

    again = make_turnlog(owner="boot-2")
    restarted = TurnlogDiscord(again, agent)
    restarted.attach(Client(channel))
    asyncio.run(restarted.client.events["on_ready"]())
    asyncio.run(restarted.client.events["on_ready"]())  # a reconnect: the gateway started once
    assert restarted.swept is not None and restarted.swept.delivered == [owed.delivery_id]
    assert channel.sent[1:] == [owed.content, RECOVERED_PREFIX + owed.content]  # the failed send, then one resend
    assert [row.state for row in again.ledger()] == ["delivered", "delivered"]


def test_at_start_each_bot_settles_only_its_own_accounts_replies(make_turnlog: Any) -> None:
    users = [SimpleNamespace(id=ident, name=f"bot-{ident}", bot=True) for ident in (1, 2)]
    channels = [Channel(100), Channel(100, failures=[server_error()])]  # the second bot's send may have posted
    first = make_turnlog(owner="boot-1")
    first.start_gateway("discord")
    for user, channel in zip(users, channels):
        bot = TurnlogDiscord(first, agent, reconcile=lambda target, attempt: False)  # known not to have arrived
        bot.attach(Client(channel, user=user))
        run(bot, message(800 + user.id, f"hello {user.id}", channel, guild=None))
    assert [row.state for row in first.ledger()] == ["delivered", "unknown"]
    first.close()

    again = make_turnlog(owner="boot-2")
    for user, channel in zip(users, channels):  # the first bot starts first
        bot = TurnlogDiscord(again, agent, reconcile=lambda target, attempt: False)
        bot.attach(Client(channel, user=user))
        asyncio.run(bot.client.events["on_ready"]())
    assert [c.sent for c in channels] == [["re: hello 1"], ["re: hello 2", "re: hello 2"]]  # through its own bot
    assert [row.state for row in again.ledger()] == ["delivered", "delivered"]


def test_a_repeated_command_that_the_engine_answers_again_is_still_sent_once(t: turnlog.Turnlog) -> None:
    channel = Channel(100)
    adapter = TurnlogDiscord(t, agent)
    adapter.attach(Client(channel))
    usage = message(730, "/queue", channel)  # without text: its usage, answered on each delivery
    run(adapter, usage, usage)
    assert len(channel.sent) == 1 and [row.state for row in t.ledger()] == ["delivered"]


def test_at_start_each_bot_resumes_only_its_own_accounts_interrupted_turns(make_turnlog: Any) -> None:
    users = [SimpleNamespace(id=ident, name=f"bot-{ident}", bot=True) for ident in (1, 2)]
    channels = [Channel(100), Channel(100)]
    first = make_turnlog(owner="boot-1")
    first.start_gateway("discord")
    for user, channel in zip(users, channels):
        bot = TurnlogDiscord(first, agent)
        bot.attach(Client(channel, user=user))
        run(bot, message(900 + user.id, f"hello {user.id}", channel, guild=None))
    second_bots = source_of(message(902, "hello 2", channels[1], guild=None), account_id="2")
    assert second_bots is not None and first.mark_resume_pending(second_bots)  # its turn was cut off
    first.close()

    again = make_turnlog(owner="boot-2")
    waiting: list[list[str]] = []
    for user, channel in zip(users, channels):  # the first bot starts first
        bot = TurnlogDiscord(again, agent)
        bot.attach(Client(channel, user=user))
        asyncio.run(bot.client.events["on_ready"]())
        waiting.append([row.session_key for row in again.resume_candidates("discord")])
    assert waiting == [["agent:main:discord:dm:2:100"], []]  # left by the first bot, settled by its own
