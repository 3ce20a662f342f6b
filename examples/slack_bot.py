#!/usr/bin/env python3
"""A Slack app on turnlog with slack-bolt (pip install 'turnlog[slack]').

Each event is accepted durably and acknowledged at once (within Slack's 3 s); its turn runs after,
under turnlog's lease. A retried event (X-Slack-Retry-Num) carries the same event_id and is
refused by turnlog's dedup. Replies go through the delivery ledger.

    SLACK_BOT_TOKEN=xoxb-... SLACK_SIGNING_SECRET=... python examples/slack_bot.py [--db gateway.db] [--port 3000]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing


def agent(history: Any, item: Any) -> str:
    return f"You said: {item.text}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="gateway.db", help="the turnlog database (default gateway.db)")
    parser.add_argument("--port", type=int, default=3000, help="the port of the Events API endpoint")
    parser.add_argument("--account", default=None,
                        help="the bot account the routing keys carry (default: the app's id, api_app_id); "
                             "'none' keeps keys without one, as a one-bot gateway stored them")
    args = parser.parse_args(argv)
    token, secret = os.environ.get("SLACK_BOT_TOKEN"), os.environ.get("SLACK_SIGNING_SECRET")
    if not token or not secret:
        parser.error("set SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET")

    from slack_bolt import App

    import turnlog
    from turnlog.integrations.slack import TurnlogSlack

    app = App(token=token, signing_secret=secret)
    account = False if args.account == "none" else args.account  # None: each event's api_app_id
    slack = TurnlogSlack(turnlog.open(args.db), agent, account_id=account)
    slack.attach(app)
    slack.start(app.client)
    app.start(port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
