"""Writes tests/data/log-deflate-v1-events.db: a log as turnlog a0c9696 (deflate v1 events) wrote it.

Run with turnlog at a0c9696 installed (a worktree of that commit with its own venv):
    rm -f /tmp/old.db && TURNLOG_COMPACT_EVENTS=0 turnlog --db /tmp/old.db demo >/dev/null
    python tests/data/make_deflate_v1_log.py /tmp/old.db tests/data/log-deflate-v1-events.db
The demo's ~130 events of ~30 kinds are stored as plain JSON (compaction off); then 60 turns on
one key with compaction on store deflate-v1 events and v1 snapshots (every 100th version of a
session, its lease and its inbox). Only the log is kept (events, snapshots, chain, marker):
read models rebuild from it.
"""

import os
import sys

from one_file import one_file_copy
from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog

src, out = sys.argv[1], sys.argv[2]
os.environ["TURNLOG_COMPACT_EVENTS"] = "1"
with Turnlog(src, clock=ManualClock("2026-03-01T10:00:00+00:00"), session_ids=SequentialIds(), owner="old") as t:
    source = SessionSource(platform="telegram", chat_type="dm", chat_id="4242", user_id="4242")
    for n in range(60):
        t.handle_message(SessionSource(**{**source.__dict__, "message_id": f"old{n}"}), f"old message {n}",
                         lambda history, item: f"old reply to {item.text}", lambda text: None)
conn = one_file_copy(src, out)
keep = {"stored_events", "stored_snapshots", "chain", "chain_meta", "turnlog_meta"}
# full-text tables first (dropping one drops its shadow tables), then the other read models
for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'").fetchall():
    conn.execute(f"DROP TABLE {name}")
for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
    if name not in keep:
        conn.execute(f"DROP TABLE {name}")
conn.execute("PRAGMA journal_mode=DELETE")
conn.execute("VACUUM")
conn.close()
