"""A Telegram bot process for the end-to-end tests: the real python-telegram-bot, polling the
fake Bot API at argv[3], in front of turnlog on argv[1]. argv[2] is the work folder of the cues:

- the agent answers "echo: TEXT"; while `block` exists there it writes `blocked.json` and waits
  for ever (the test kills the process mid-turn);
- `started.json` is written once the gateway started (the boot and its sweep, as JSON);
- reconcile asks the fake server what it recorded (a deployment would ask its relay's log).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from telegram.ext import Application

import turnlog
from turnlog.integrations.telegram import TurnlogTelegram

from integrations.fake_bot_api import TOKEN

db, work, base = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
assert urlsplit(base).hostname == "127.0.0.1", "the tests never reach the network"


def mark(name: str, **data: object) -> None:
    tmp = work / f".{name}.tmp"
    tmp.write_text(json.dumps({"pid": os.getpid(), **data}, default=str))
    os.replace(tmp, work / f"{name}.json")


async def agent(history: object, item: Any) -> str:
    if (work / "block").exists():
        mark("blocked", text=item.text)
        await asyncio.Event().wait()
    return f"echo: {item.text}"


def reconcile(target: dict, attempt: Any) -> bool:
    with urllib.request.urlopen(f"{base}/_recorded", timeout=5) as answer:
        recorded = json.loads(answer.read())
    return any(m["chat_id"] == target["chat_id"] and m["text"] == attempt.text for m in recorded)


async def started(app: Application) -> None:
    await bot.on_start(app)
    mark("started", boot=bot.boot.to_dict() if bot.boot else None,
         swept=bot.swept.to_dict() if bot.swept else None)


bot = TurnlogTelegram(turnlog.open(db), agent, reconcile=reconcile)
builder = (Application.builder().token(TOKEN).base_url(f"{base}/bot").base_file_url(f"{base}/file/bot")
           .connect_timeout(2).read_timeout(1).write_timeout(1).get_updates_read_timeout(5))
app = bot.build(builder)
app.post_init = started
app.run_polling(poll_interval=0, timeout=1, close_loop=False)
