"""What every bot adapter does the same way: accept first, run the key's turns in a task after,
and on start settle what earlier boots owed (recover, sweep, resume, run what waits)."""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator, Union

from turnlog import (SLASH_COMMANDS, Accepted, BootReport, CommandResult, SessionSource, SweepReport, Turnlog,
                     TurnOutcome, parse_command)
from turnlog.aio import AsyncAgent, wrap

# Sends `text` to a reply target (a ledger target: platform, chat_id, thread_id, ...).
SendTo = Callable[[dict[str, Any], str], Awaitable[Any]]
# An adapter's account_id option: None (the bot's own id), an account, or False (no account).
AccountOption = Union[str, bool, None]


class BotGateway:
    """One bot in front of one Turnlog. `agent(history, item)` is a coroutine function
    (turnlog.aio's agent); `gateway` names the boots in `turnlog status`; `reconcile(target,
    attempt)` answers whether a send of unknown outcome reached the chat; `account_id` is the bot
    account the keys carry (docs/behaviour.md §2.8): by default the id of the bot the adapter runs
    as, a string to name it otherwise, False for keys without an account (account_of)."""

    platform = ""

    def __init__(self, turnlog: Turnlog, agent: AsyncAgent, *, gateway: str | None = None,
                 reconcile: Any = None, account_id: AccountOption = None) -> None:
        self.turnlog = turnlog
        self.account_option = account_id
        self.bot_id: Any = None  # the bot's own id, once the library knows it (set by the adapter)
        self.aio = wrap(turnlog)
        self.agent = agent
        self.gateway = gateway or self.platform
        self.reconcile = reconcile
        self.tasks: set[asyncio.Task[Any]] = set()
        self.boot: BootReport | None = None
        self.swept: SweepReport | None = None

    @property
    def account_id(self) -> str | None:
        """The account this bot's sources name (None: none, or the bot's id not known yet)."""
        return account_of(self.account_option, self.bot_id)

    async def accept(self, source: SessionSource, text: str) -> Accepted:
        """Durably accept one inbound message (a repeat is refused: `duplicate` says why)."""
        return await self.aio.run(self.turnlog.accept, source, text)

    async def take(self, source: SessionSource, text: str, send_to: SendTo) -> bool:
        """What a handler does with a message: a slash command (/new, /stop, /queue...) is
        handled at once and answered; anything else is accepted. Then, unless it was a repeat,
        the key's turns run in a task of their own. False for a repeat."""
        parsed = parse_command(text)
        if parsed is not None and parsed[0] in SLASH_COMMANDS:
            result = await self.aio.run(self.turnlog.command, source, text)
            if result.duplicate:
                return False
            await self.answer(source, result, send_to)
        elif (await self.accept(source, text)).duplicate is not None:
            return False
        self.spawn(self.run_pending(source, send_to))
        return True

    async def answer(self, source: SessionSource, result: CommandResult, send_to: SendTo) -> str | None:
        """Send a command's own answer through the ledger, like a turn's reply: owed first, then
        sent and settled, so a send that fails (or may have) is settled by the next start's sweep.
        Its state (None when the command answered nothing)."""
        turns = self.turnlog.turns
        ident = await self.aio.run(turns.record_command_reply, source, result)
        if ident is None:
            return None
        loop = asyncio.get_running_loop()
        target = target_of(source)

        async def sending(text: str) -> None:
            await send_to(target, text)

        def send(text: str) -> None:  # in a worker thread: the send itself runs on the loop
            asyncio.run_coroutine_threadsafe(sending(text), loop).result()
        return await self.aio.run(turns.deliver, ident, send)

    async def run_pending(self, source: SessionSource, send_to: SendTo) -> list[TurnOutcome]:
        """Run the key's waiting turns, each under turnlog's lease, replies through the ledger."""
        target = target_of(source)

        async def send(text: str) -> None:
            await send_to(target, text)
        return await self.aio.run_pending(source, self.agent, send)

    def spawn(self, work: Awaitable[Any]) -> None:
        """Run `work` in a task of its own (kept until done, awaited by `wait`)."""
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def start(self, send_to: SendTo) -> None:
        """Recover earlier boots, settle their owed and unknown replies, resume interrupted turns,
        then run messages accepted but never run."""
        self.boot = await self.aio.start_gateway(self.gateway)
        scope: dict[str, Any] = {"platforms": {self.platform}}
        if self.account_id is not None:  # another bot's rows go out through it; none's through the first
            scope["accounts"] = {self.account_id, None}
        options = dict(scope)
        if self.reconcile is not None:
            options["reconcile"] = self.reconcile
        self.swept = await self.aio.sweep_deliveries(send_to, **options)
        # resume_interrupted has one sender for every session; the agent runs first in each
        # resumed turn, so it notes where that turn's reply goes.
        target: dict[str, Any] = {}

        async def agent(history: Any, item: Any) -> Any:
            target.clear()
            target.update(item.source or {})
            return await self.agent(history, item)

        async def send(text: str) -> None:
            await send_to(target, text)
        await self.aio.resume_interrupted(agent, send, **scope)
        for source in await self.aio.run(self.turnlog.pending_inbound):
            if self.serves(source):
                self.spawn(self.run_pending(source, send_to))

    def serves(self, source: SessionSource) -> bool:
        """Whether a message accepted earlier is this bot's to run: its platform, and its account
        or none (accepted before accounts were known)."""
        return source.platform == self.platform and source.account_id in (None, self.account_id)

    async def stop(self) -> None:
        """Wait for the running turns, then record a clean stop."""
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.aio.stop_gateway()


def account_of(option: AccountOption, bot_id: Any) -> str | None:
    """The account a bot's keys carry: an explicit one wins; False keeps keys without one (a
    gateway upgrading from one bot that keeps its old keys as they are); else (None) the bot's
    own id, once known."""
    if option is False:
        return None
    if isinstance(option, str) and option:
        return option
    return str(bot_id) if bot_id is not None else None


def target_of(source: SessionSource) -> dict[str, Any]:
    """Where a reply to the source goes, as the ledger names a target."""
    return {"platform": source.platform, "chat_id": source.chat_id, "thread_id": source.thread_id}


@contextmanager
def classifying(classify: Callable[[BaseException], BaseException]) -> Iterator[None]:
    """Around a platform send: a failure is raised as `classify` names it for the ledger
    (SendOutcomeUnknown when it may have reached the chat), chained to the original."""
    try:
        yield
    except Exception as failure:  # noqa: BLE001 - every failure is classified for the ledger
        mapped = classify(failure)
        if mapped is failure:
            raise
        raise mapped from failure


__all__ = ["AccountOption", "BotGateway", "SendTo", "account_of", "classifying", "target_of"]
