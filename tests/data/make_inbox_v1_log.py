"""Writes tests/data/inbox-v1-accepted-started.db: a log whose inbox events are version 1, as
turnlog f27f2f0 wrote them (every message an InboundAccepted carrying its text, each turn's
start a separate InboundStarted).

Run with turnlog at f27f2f0 importable (its package on PYTHONPATH, e.g. from `git archive f27f2f0 turnlog`):
    PYTHONPATH=/tmp/old python tests/data/make_inbox_v1_log.py /tmp/old.db tests/data/inbox-v1-accepted-started.db
One key (telegram dm 42) with a turn completed and a second one killed in flight (its item
started, its user message saved, no reply); another (discord dm 7) with two texts waiting, merged
into one item. The process dies with os._exit, as a SIGKILL would leave it; its boot is recorded,
so recovery finds the turn interrupted. The read models are kept as that version left them (the
queue's at its version 2). ManualClock 2026-03-01T10:00, SequentialIds, owner "old".
"""

import os
import sys

from one_file import one_file_copy
from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog

src, out = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    t = Turnlog(src, clock=ManualClock("2026-03-01T10:00:00+00:00"), session_ids=SequentialIds(), owner="old",
                 encryption=False)
    t.start_gateway("main")
    alice = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", message_id="a1")
    bob = SessionSource(platform="discord", chat_type="dm", chat_id="7", user_id="7", message_id="b1")
    t.handle_message(alice, "hello from the old log", lambda history, item: f"old reply to {item.text}",
                     lambda text: None)
    t.accept(bob, "bob waits")
    t.accept(SessionSource(**{**bob.__dict__, "message_id": "b2"}), "and adds a line")
    t.turns.accept_and_start(SessionSource(**{**alice.__dict__, "message_id": "a2"}), "alice in flight")
    os._exit(0)
_, status = os.wait()
assert status == 0, status
one_file_copy(src, out).close()  # the read models stay as that turnlog left them
