#!/usr/bin/env python3
"""A Telegram bot on turnlog with python-telegram-bot (pip install 'turnlog[telegram]').

Every update is accepted durably before its handler returns (a redelivered one is refused by its
message id), its turn runs under turnlog's lease, and the reply goes through the delivery ledger:
a restart resumes an interrupted turn and settles what the last boot owed.

    TELEGRAM_TOKEN=123:ABC python examples/telegram_bot.py [--db gateway.db] [--base-url URL]

The agent here echoes; put your model call in `agent`. `--base-url` points the bot at another Bot
API server (a local one, or a test's fake). Two bots may share one --db (each run with its own
token): the keys carry each bot's id, so one user's chats with the two are two sessions.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing


async def agent(history: Any, item: Any) -> str:
    """The model call: the session's transcript so far and the item to answer."""
    return f"You said: {item.text}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="gateway.db", help="the turnlog database (default gateway.db)")
    parser.add_argument("--base-url", default=None, help="the Bot API's base URL, ending in /bot")
    parser.add_argument("--hold-unknown", action="store_true",
                        help="hold sends of unknown outcome for an operator instead of resending them")
    parser.add_argument("--account", default=None,
                        help="the bot account the routing keys carry (default: the bot's own id); "
                             "'none' keeps keys without one, as a one-bot gateway stored them")
    args = parser.parse_args(argv)
    token = os.environ.get("TELEGRAM_TOKEN")
    if not token:
        parser.error("set TELEGRAM_TOKEN to the bot's token")

    from telegram.ext import Application

    import turnlog
    from turnlog.integrations.telegram import TurnlogTelegram

    # The Bot API cannot list the bot's own messages, so an unknown send cannot be reconciled
    # there: resend it marked as recovered (the default), or hold it for `turnlog ledger`.
    config = turnlog.EngineConfig(unknown_send_policy={"telegram": "hold"}) if args.hold_unknown else None
    account = False if args.account == "none" else args.account  # None: the bot's id, from getMe
    bot = TurnlogTelegram(turnlog.open(args.db, config=config), agent, account_id=account)
    builder = Application.builder().token(token)
    if args.base_url:
        builder = builder.base_url(args.base_url)
    bot.build(builder).run_polling()
    return 0


if __name__ == "__main__":
    sys.exit(main())
