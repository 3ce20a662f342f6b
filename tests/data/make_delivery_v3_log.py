"""Writes tests/data/deliveries-v3-attempting.db: a database as turnlog f27f2f0 wrote it, whose turns
saved a version-3 DeliveryRecorded and a DeliveryAttempting beside it, read models included
(the ledger's at projection version 3).

Run with turnlog at f27f2f0 installed:
    python tests/data/make_delivery_v3_log.py tests/data/deliveries-v3-attempting.db
Four turns on four telegram dms: one reply delivered, one whose send failed, one whose send timed
out (unknown), and one interrupted between the reply's save and its send (left attempting, its
lease held, the gateway never stopped), then a command's answer recorded with its own words.
"""

import os
import shutil
import sqlite3
import sys
import tempfile
from contextlib import closing

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog

out = sys.argv[1]
src = os.path.join(tempfile.mkdtemp(), "old.db")


def dm(chat: str, message_id: str) -> SessionSource:
    return SessionSource(platform="telegram", chat_type="dm", chat_id=chat, user_id=chat, message_id=message_id)


def refuse(text: str) -> None:
    raise ConnectionError("platform down")


def time_out(text: str) -> None:
    raise TimeoutError("read timed out")


def die(text: str) -> None:
    raise KeyboardInterrupt  # not an Exception: nothing records the send's end, as after a kill


t = Turnlog(src, clock=ManualClock("2026-03-01T10:00:00+00:00"), session_ids=SequentialIds(), owner="old",
            encryption=False)
t.start_gateway("old")
t.handle_message(dm("1", "a1"), "hello", lambda history, item: "delivered reply", lambda text: None)
t.handle_message(dm("2", "b1"), "hello", lambda history, item: "failed reply", refuse)
t.handle_message(dm("3", "c1"), "hello", lambda history, item: "unknown reply", time_out)
try:
    t.handle_message(dm("4", "d1"), "hello", lambda history, item: "interrupted reply", die)
except KeyboardInterrupt:
    pass
status = dm("5", "e1")
t.turns.record_command_reply(status, t.command(status, "/status"))
t.maintenance.catch_up()
t.close()
# the whole database as one file (no -wal beside it), read models included
with closing(sqlite3.connect(src, isolation_level=None)) as conn:
    conn.execute("PRAGMA journal_mode=DELETE")
shutil.copyfile(src, out)
