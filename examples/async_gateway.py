#!/usr/bin/env python3
"""An asyncio gateway on turnlog: two fake platforms, an agent that thinks 0.5-5 s and calls a tool.

Each platform is an asyncio task that delivers its users' messages at random moments; every
message is handed to `AsyncTurnlog.handle_message`, which accepts it durably, runs the key's turns
one at a time (keys concurrently) and sends the replies back through the platform's coroutine.
The agent streams a rich reply: an assistant message calling the `weather` tool, the tool's
result, and the answer with its token usage; the lease keeper renews each turn's lease while the
agent thinks, however long that takes.

    python examples/async_gateway.py [--db gateway.db] [--messages 8] [--seed 1]

Prints one line per reply, then a summary: `messages=N replies=R tool_calls=T keys=K`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from turnlog import ReplyMessage, SessionSource, Turnlog, Usage  # noqa: E402
from turnlog.aio import AsyncTurnlog  # noqa: E402


class FakePlatform:
    """A chat platform: users who write, and a send coroutine that 'posts' a reply."""

    def __init__(self, name: str, users: list[str], rng: random.Random) -> None:
        self.name = name
        self.users = users
        self.rng = rng
        self.posted: list[tuple[str, str]] = []

    def source(self, user: str, n: int) -> SessionSource:
        return SessionSource(platform=self.name, chat_type="dm", chat_id=f"{self.name}-{user}", user_id=user,
                             user_name=user, message_id=f"{self.name}-{user}-{n}")

    def sender(self, user: str):
        async def send(text: str) -> None:
            await asyncio.sleep(0.01)  # the platform's API call
            self.posted.append((user, text))
            print(f"[{self.name}] -> {user}: {text}", flush=True)
        return send


async def weather(city: str) -> str:
    await asyncio.sleep(0.1)
    return f"sunny in {city}"


def make_agent(rng: random.Random):
    async def agent(history, item):
        """Thinks 0.5-5 s, calls the weather tool, then answers (an async generator of messages)."""
        await asyncio.sleep(rng.uniform(0.5, 5.0))
        call_id = f"call_{item.item_id}_{len(history)}"
        yield ReplyMessage(role="assistant", tool_calls=[{"id": call_id, "type": "function", "function": {
            "name": "weather", "arguments": '{"city": "Lisbon"}'}}], finish_reason="tool_calls", model="fake-llm")
        yield ReplyMessage(role="tool", tool_call_id=call_id, name="weather", content=await weather("Lisbon"))
        yield ReplyMessage(content=f"You said {item.text!r}; it is sunny in Lisbon.", finish_reason="stop",
                           model="fake-llm", usage=Usage(input_tokens=40 + len(history), output_tokens=12))
    return agent


async def run(db: str, messages: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    platforms = [FakePlatform("telegram", ["ana", "bo"], rng), FakePlatform("discord", ["cy", "dee"], rng)]
    gateway = AsyncTurnlog(Turnlog(db))
    await gateway.start_gateway("async-example")
    agent = make_agent(rng)

    async def traffic(platform: FakePlatform, count: int) -> None:
        turns = []
        for n in range(count):
            await asyncio.sleep(rng.uniform(0.0, 0.5))
            user = rng.choice(platform.users)
            source = platform.source(user, n)
            turns.append(asyncio.create_task(
                gateway.handle_message(source, f"message {n} from {user}", agent, platform.sender(user))))
        await asyncio.gather(*turns)

    await asyncio.gather(*(traffic(p, messages // len(platforms)) for p in platforms))
    await gateway.drain("shutdown", timeout_s=5)
    t = gateway.turnlog
    keys = {s.session_key for s in t.sessions()}
    tool_calls = sum(1 for s in t.sessions() for m in t.transcript(s.session_id) if m["role"] == "tool")
    summary = {"messages": messages // len(platforms) * len(platforms),
               "replies": sum(len(p.posted) for p in platforms), "tool_calls": tool_calls, "keys": len(keys)}
    await gateway.close()
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="an asyncio gateway on turnlog with two fake platforms")
    parser.add_argument("--db", default=None, help="the database (default: a fresh temporary one)")
    parser.add_argument("--messages", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    db = args.db or str(Path(tempfile.mkdtemp(prefix="turnlog-async-")) / "gateway.db")
    summary = asyncio.run(run(db, args.messages, args.seed))
    print(" ".join(f"{k}={v}" for k, v in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
