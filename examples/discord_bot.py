#!/usr/bin/env python3
"""A Discord bot on turnlog with discord.py (pip install 'turnlog[discord]').

Messages are deduplicated by their id (a gateway RESUME replays what it missed), each turn runs
under turnlog's lease, replies go through the delivery ledger; on ready, what the last boot owed
is settled (an unknown send looked for in the channel's history first).

    DISCORD_TOKEN=... python examples/discord_bot.py [--db gateway.db]
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
    return f"You said: {item.text}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="gateway.db", help="the turnlog database (default gateway.db)")
    parser.add_argument("--account", default=None,
                        help="the bot account the routing keys carry (default: the bot's own id); "
                             "'none' keeps keys without one, as a one-bot gateway stored them")
    args = parser.parse_args(argv)
    token = os.environ.get("DISCORD_TOKEN")
    if not token:
        parser.error("set DISCORD_TOKEN to the bot's token")

    import discord

    import turnlog
    from turnlog.integrations.discord import TurnlogDiscord

    intents = discord.Intents.default()
    intents.message_content = True
    account = False if args.account == "none" else args.account  # None: the bot's user id, at login
    client = TurnlogDiscord(turnlog.open(args.db), agent, account_id=account).attach(discord.Client(intents=intents))
    client.run(token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
