#!/usr/bin/env python3
"""How long the routing map as of a past moment takes on a large log: `at('#N').routes()`.

The log is one the standard workload built (about 13 events per turn, so 1000 sessions x 75 turns
is about 1M events). Either point at one already built:

    turnlog bench -S 1000 -T 75 --workdir /tmp/tt-bench       # minutes; keeps /tmp/tt-bench/bench.db
    python benchmarks/bench_time_travel.py --db /tmp/tt-bench/bench.db

or let this script build it first (same workload, through turnlog.bench.run_bench):

    python benchmarks/bench_time_travel.py --build /tmp/tt-bench --sessions 1000 --turns 75

It opens the log, brings the read models and the hash chain up to date (timed apart: a gateway
pays that once, not per query), then asks `at('#N').routes()` at --positions positions spread
evenly over the log, first to last, twice over (the first pass finds SQLite's pages cold, the
second warm). Prints one JSON document: p50 and max in ms of each pass and of both, each
position's time and routing-map size, and whether the goal (max <= 100 ms) was met; also, for
comparison, `at('#N').session(S)` with `.lease(S)` of one session at the same positions.

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
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from turnlog.api import Turnlog  # noqa: E402

GOAL_MS = 100.0


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def spread(head: int, count: int) -> list[int]:
    """`count` positions evenly over 1..head, the last one the head itself."""
    return sorted({max(1, round(head * (i + 1) / count)) for i in range(count)})


def build(workdir: str, sessions: int, turns: int, seed: int) -> tuple[str, dict[str, Any]]:
    from turnlog.bench import run_bench

    def progress(done: int, total: int) -> None:
        if done % 5000 == 0 or done == total:
            print(f"  built {done}/{total} turns", file=sys.stderr, flush=True)

    result = run_bench(sessions, turns, seed, workdir=workdir, progress=progress, keep=True)
    summary = {k: result.get(k) for k in ("params", "turns_done", "events", "workload_wall_s", "turns_per_s")}
    return os.path.join(workdir, "bench.db"), summary


def measure(db: str, count: int) -> dict[str, Any]:
    t = Turnlog(db, owner="bench-time-travel")
    try:
        t0 = time.perf_counter()
        applied = t.maintenance.catch_up()
        catch_up_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        sealed = t.maintenance.seal()
        seal_s = time.perf_counter() - t0
        head = t.maintenance.log_head()  # caught up above: no further catch-up
        positions = spread(head, count)
        passes: list[list[float]] = []
        sizes: dict[int, int] = {}
        for _ in range(2):
            times = []
            for p in positions:
                q0 = time.perf_counter()
                routes = t.at(f"#{p}").routes()
                times.append((time.perf_counter() - q0) * 1000)
                sizes[p] = len(routes)
            passes.append(times)
        # The other views rebuild aggregates at the version they had then: one session's row and
        # lease at the same positions (a session created before the first position).
        session_id = t.at(f"#{positions[0]}").routes()[0]["session_id"]
        one_session = []
        for p in positions:
            q0 = time.perf_counter()
            moment = t.at(f"#{p}")
            moment.session(session_id)
            moment.lease(session_id)
            one_session.append((time.perf_counter() - q0) * 1000)
        route_history_rows = t._projections.db.execute("SELECT COUNT(*) FROM route_history").fetchone()[0]  # no public count
    finally:
        t.close()

    every = passes[0] + passes[1]

    def stats(values: list[float]) -> dict[str, float]:
        return {"p50": round(percentile(values, 0.5), 3), "max": round(max(values), 3),
                "mean": round(statistics.fmean(values), 3)}

    return {
        "benchmark": "at('#N').routes() at positions spread over the log",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "db": db,
        "db_bytes": os.path.getsize(db),
        "events": head,
        "route_history_rows": route_history_rows,
        "preparation": {"projection_events_applied": applied, "catch_up_s": round(catch_up_s, 3),
                        "chain_events_sealed": sealed, "seal_s": round(seal_s, 3)},
        "positions": len(positions),
        "first_pass_ms": stats(passes[0]),
        "second_pass_ms": stats(passes[1]),
        "all_ms": stats(every),
        "one_session_and_lease_ms": stats(one_session),
        "goal_ms": GOAL_MS,
        "goal_met": max(every) <= GOAL_MS,
        "per_position": [{"position": p, "routes": sizes[p], "first_ms": round(a, 3), "second_ms": round(b, 3)}
                         for p, a, b in zip(positions, passes[0], passes[1])],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--db", help="an existing log (e.g. the bench.db of `turnlog bench --workdir DIR`)")
    where.add_argument("--build", metavar="DIR", help="build the log in DIR first (DIR/bench.db must not exist)")
    parser.add_argument("--sessions", "-S", type=int, default=1000, help="with --build (default 1000)")
    parser.add_argument("--turns", "-T", type=int, default=75, help="with --build: turns per session (default 75)")
    parser.add_argument("--seed", type=int, default=1, help="with --build (default 1)")
    parser.add_argument("--positions", type=int, default=20, help="positions to ask at (default 20)")
    args = parser.parse_args(argv)
    if args.positions < 1:
        parser.error("--positions must be at least 1")

    built = None
    if args.build:
        db, built = build(args.build, args.sessions, args.turns, args.seed)
    else:
        db = args.db
        if not os.path.exists(db):
            parser.error(f"{db} does not exist")
    report = measure(db, args.positions)
    if built is not None:
        report["built"] = built
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
