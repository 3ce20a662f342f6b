"""Writes tests/data/first-turn-v1-separate-events.db: first turns as turnlog f27f2f0 recorded them,
a route's `RouteRegistered` (version 1) beside its `RouteBound`, a lease's `LeaseOpened` (version 1)
beside its first `LeaseAcquired`.

Run with turnlog at f27f2f0 importable (e.g. `git archive f27f2f0 turnlog | tar -x -C /tmp/old`):
    PYTHONPATH=/tmp/old python tests/data/make_first_turn_v1_log.py tests/data/first-turn-v1-separate-events.db
Two keys (telegram dm 42, discord dm 7): one turn on each, a second on the first; then `/new` on
the second key (a later RouteBound) and its next turn. The read models are kept as they were
built, so a rebuild is compared with them. Unencrypted, so it needs no key file.
"""

import os
import sys

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog

out = sys.argv[1]
if os.path.exists(out):
    os.remove(out)
telegram_dm = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", user_name="alice")
discord_dm = SessionSource(platform="discord", chat_type="dm", chat_id="7", user_id="7", user_name="bob")
clock = ManualClock("2026-01-01T00:00:00+00:00")
with Turnlog(out, clock=clock, session_ids=SequentialIds(), owner="old", encryption=False) as t:
    for n, (source, text) in enumerate([(telegram_dm, "hello"), (discord_dm, "hi"), (telegram_dm, "again")]):
        t.handle_message(SessionSource(**{**source.__dict__, "message_id": f"m{n}"}), text,
                         lambda history, item: f"re: {item.text}", lambda text: None)
        clock.advance(60)
    t.command(SessionSource(**{**discord_dm.__dict__, "message_id": "m3"}), "/new")
    t.handle_message(SessionSource(**{**discord_dm.__dict__, "message_id": "m4"}), "fresh",
                     lambda history, item: f"re: {item.text}", lambda text: None)
    t.maintenance.catch_up()
