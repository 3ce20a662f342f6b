"""What every bot adapter does the same way: accept first, run the key's turns in a task after,
and on start settle what earlier boots owed (recover, sweep, resume, run what waits)."""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator

from turnlog import (SLASH_COMMANDS, Accepted, BootReport, SessionSource, SweepReport, Turnlog, TurnOutcome,
                     parse_command)
from turnlog.aio import AsyncAgent, wrap

# Sends `text` to a reply target (a ledger target: platform, chat_id, thread_id, ...).
SendTo = Callable[[dict[str, Any], str], Awaitable[Any]]


class BotGateway:
    """One bot in front of one Turnlog. `agent(history, item)` is a coroutine function
    (turnlog.aio's agent); `gateway` names the boots in `turnlog status`; `reconcile(target,
    attempt)` answers whether a send of unknown outcome reached the chat; `account_id` names the
    bot account when the gateway runs several bots on one platform (it becomes part of the key:
    docs/behaviour.md §2.8), None for one bot."""

    platform = ""

    def __init__(self, turnlog: Turnlog, agent: AsyncAgent, *, gateway: str | None = None,
                 reconcile: Any = None, account_id: str | None = None) -> None:
        self.turnlog = turnlog
        self.account_id = account_id
        self.aio = wrap(turnlog)
        self.agent = agent
        self.gateway = gateway or self.platform
        self.reconcile = reconcile
        self.tasks: set[asyncio.Task[Any]] = set()
        self.boot: BootReport | None = None
        self.swept: SweepReport | None = None

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
            if result.reply:  # the command's own answer: not a turn's reply, so not owed by the ledger
                await send_to(target_of(source), result.reply)
        elif (await self.accept(source, text)).duplicate is not None:
            return False
        self.spawn(self.run_pending(source, send_to))
        return True

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
        options: dict[str, Any] = {"platforms": {self.platform}}
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
        await self.aio.resume_interrupted(agent, send)
        for source in await self.aio.run(self.turnlog.pending_inbound):
            if source.platform == self.platform:
                self.spawn(self.run_pending(source, send_to))

    async def stop(self) -> None:
        """Wait for the running turns, then record a clean stop."""
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.aio.stop_gateway()


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


__all__ = ["BotGateway", "SendTo", "classifying", "target_of"]
