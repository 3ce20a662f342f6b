#!/usr/bin/env python3
"""Compacting a long session in place, and the agent-history read before and after it.

    python benchmarks/bench_compaction.py --messages 5000 --keep 10 --runs 3

Each run builds a fresh log holding one session of --messages messages (user and assistant in
turn, about 200 characters each, written under one lease as a turn loop would), catches the read
models up (timed apart: a gateway pays that as it goes), then times:

- `t.turns.agent_history(session_id)` before the compaction (median of --reads reads): every
  message is read from the log;
- `t.compact(session_id, keep_turns=K)` with the deterministic fallback summary (the gateway's
  summariser is a model call, not turnlog's cost): planning reads the history once, then one
  transaction records `TranscriptCompacted` with the lease's instant hold;
- `t.turns.agent_history(session_id)` after it (median of --reads reads): only the summary and
  the messages above the compacted range are read (domain/history.py `history_floor`);
- `t.turns.needs_compression` under a lease after it, which counts the history from the edits.

Prints one JSON document: each figure's median over the runs (ms) and every run's figures.
Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog  # noqa: E402

SOURCE = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42")
TEXT = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 4


def build(db: str, messages: int) -> tuple[Turnlog, str]:
    t = Turnlog(db, clock=ManualClock(), session_ids=SequentialIds())
    session_id = t.get_or_create_session(SOURCE).session_id
    token = t.turns.acquire_lease(session_id, t.routing_key(SOURCE))
    for i in range(messages):
        t.turns.append_message(token, "user" if i % 2 == 0 else "assistant", f"{i}: {TEXT}")
    t.turns.release_lease(token)
    return t, session_id


def timed_reads(t: Turnlog, session_id: str, reads: int) -> tuple[float, int]:
    times, length = [], 0
    for _ in range(reads):
        start = time.perf_counter()
        length = len(t.turns.agent_history(session_id))
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), length


def one_run(messages: int, keep: int, reads: int, workdir: str) -> dict[str, Any]:
    db = os.path.join(workdir, f"compaction-{time.monotonic_ns()}.db")
    start = time.perf_counter()
    t, session_id = build(db, messages)
    built_s = time.perf_counter() - start
    try:
        start = time.perf_counter()
        t.maintenance.catch_up()  # a gateway's read models keep up as it goes: not the compaction's cost
        catch_up_s = time.perf_counter() - start
        before_ms, before_len = timed_reads(t, session_id, reads)
        start = time.perf_counter()
        done = t.compact(session_id, keep_turns=keep)
        compact_ms = (time.perf_counter() - start) * 1000
        after_ms, after_len = timed_reads(t, session_id, reads)
        token = t.turns.acquire_lease(session_id, t.routing_key(SOURCE))
        start = time.perf_counter()
        t.turns.needs_compression(token, prompt_tokens=0, context_length=200_000)
        hygiene_ms = (time.perf_counter() - start) * 1000
        t.turns.release_lease(token)
    finally:
        t.close()
    return {"build_s": round(built_s, 2), "catch_up_s": round(catch_up_s, 2), "history_read_before_ms": round(before_ms, 2),
            "history_length_before": before_len, "compact_ms": round(compact_ms, 2),
            "messages_compacted": done.messages_compacted, "history_read_after_ms": round(after_ms, 3),
            "history_length_after": after_len, "needs_compression_after_ms": round(hygiene_ms, 3),
            "db_bytes": os.path.getsize(db)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000, help="messages in the session (default 5000)")
    parser.add_argument("--keep", type=int, default=10, help="user turns kept verbatim (default 10)")
    parser.add_argument("--runs", type=int, default=3, help="fresh logs to measure (default 3)")
    parser.add_argument("--reads", type=int, default=5, help="history reads timed per side (default 5)")
    parser.add_argument("--workdir", default=None, help="where the logs go (default: a temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        runs = [one_run(args.messages, args.keep, args.reads, workdir) for _ in range(args.runs)]
    medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(json.dumps({"when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()},"
                                 f" SQLite {sqlite3.sqlite_version}",
                      "messages": args.messages, "keep_turns": args.keep, "median": medians, "runs": runs},
                     indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
