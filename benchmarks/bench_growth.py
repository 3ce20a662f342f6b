#!/usr/bin/env python3
"""A log that grows: its size and costs at the end against the start, then an archive of 90%.

    python benchmarks/bench_growth.py --sessions 2000 --turns 50

Runs the standard workload (turnlog/workload.py: sources, texts, turns in shuffled order) on a
fresh SQLite database under a manual clock, one turn a minute. Then:

- the per-turn cost (handle_message, ms) of the first and the last 1,000 turns;
- the database's bytes (file + WAL, after a checkpoint);
- recovery: opening the file again and running the gateway's boot recovery (`t.recover`);
- rebuild: every read model refilled from the log (`t.maintenance.rebuild()`);
- search p50 over the standard search mix (turnlog/search_timing.py);
- 90% of the sessions reset, the clock moved 100 days on, `t.archive(..., older_than="90d")`
  timed, and the file's bytes after the space is reclaimed (incremental vacuum).

Prints one JSON document. Not a test: timings depend on the machine (and on its load).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import sys
import time
from datetime import timedelta

from turnlog import ManualClock, Turnlog
from turnlog.bench import prepare_workload, run_turns
from turnlog.search_timing import run_search_mix

EDGE = 1000  # turns measured at the start and at the end


def db_bytes(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    home, db, rng, sources, order = prepare_workload(args.sessions, args.turns, args.seed, args.workdir)
    clock = ManualClock("2026-01-01T00:00:00+00:00")

    t = Turnlog(db, clock=clock, owner="bench")
    started = time.perf_counter()
    latencies = [seconds * 1000 for seconds in run_turns(
        t, sources, order, rng, lambda *a: None, after_turn=lambda: clock.advance(60),
        progress=lambda done, total: print(f"{done}/{total} turns", file=sys.stderr), every=5000)]
    workload_s = time.perf_counter() - started
    t.maintenance.catch_up()
    events = t.maintenance.log_head()
    t.close()
    grown = db_bytes(db)

    t0 = time.perf_counter()
    t = Turnlog(db, clock=clock, owner="bench-restart")
    t.recover("main")
    recovery_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    rebuilt = t.maintenance.rebuild()
    rebuild_s = time.perf_counter() - t0
    search = run_search_mix(t, seed=args.seed)

    ended = sources[: args.sessions * 9 // 10]
    for n, source in enumerate(ended):
        source.message_id = f"reset{n}"
        t.command(source, "/reset")
    clock.advance(days=100)
    t.maintenance.catch_up()
    before_archive = db_bytes(db)
    t0 = time.perf_counter()
    report = t.archive(os.path.join(home, "old.tlar"), older_than=timedelta(days=90))
    archive_s = time.perf_counter() - t0
    chain_ok = not t.maintenance.verify_chain().breaks
    t.close()
    after = db_bytes(db)

    def mean(values: list[float]) -> float:
        return round(statistics.fmean(values), 3)

    print(json.dumps({
        "bench": "growth", "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "sqlite": sqlite3.sqlite_version, "load_avg": os.getloadavg()},
        "params": {"sessions": args.sessions, "turns_per_session": args.turns, "seed": args.seed},
        "turns": len(order), "events": events, "workload_s": round(workload_s, 1),
        "turn_ms": {"first_1000_mean": mean(latencies[:EDGE]), "last_1000_mean": mean(latencies[-EDGE:]),
                    "first_1000_p50": round(statistics.median(latencies[:EDGE]), 3),
                    "last_1000_p50": round(statistics.median(latencies[-EDGE:]), 3)},
        "db_bytes": grown, "recovery_s": round(recovery_s, 3),
        "rebuild": {"seconds": round(rebuild_s, 2), "events": rebuilt["events"]},
        "search_p50_ms": search["p50_ms"],
        "archive": {"sessions": len(report.sessions), "events": report.events, "seconds": round(archive_s, 2),
                    "archive_bytes": report.bytes, "db_bytes_before": before_archive, "db_bytes_after": after,
                    "chain_ok": chain_ok},
        "workdir": home,
    }, indent=2))


if __name__ == "__main__":
    main()
