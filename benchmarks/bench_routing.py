#!/usr/bin/env python3
"""How the cost of routing a message to an existing session grows with the number of sessions.

For each S given with --sessions, a fresh SQLite store is populated with S sessions (one DM key
each, through get_or_create_session), then --calls messages are routed to keys picked at random
among them (touch_activity on, as for a real message: each call writes one event). Prints the
per-call time in microseconds (p50, mean, p99) at each S and the ratio between the largest and
the smallest S.

    python benchmarks/bench_routing.py --sessions 100 --sessions 10000 --calls 20000 --json

Not a test: timings depend on the machine. Time and ids are injected (ManualClock, SequentialIds)
and the key choice is seeded, so two runs do the same work.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from turnlog.api import Turnlog  # noqa: E402
from turnlog.clock import ManualClock, SequentialIds  # noqa: E402
from turnlog.domain.source import SessionSource  # noqa: E402


def source(n: int) -> SessionSource:
    return SessionSource(platform="telegram", chat_type="dm", chat_id=str(n), user_id=str(n))


def percentile(sorted_values: list[float], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def measure(sessions: int, calls: int, seed: int, workdir: Path) -> dict[str, Any]:
    db = workdir / f"bench-{sessions}.db"
    with Turnlog(db, clock=ManualClock("2026-03-01T10:00:00+00:00"), session_ids=SequentialIds()) as engine:
        started = time.perf_counter()
        for n in range(sessions):
            engine.get_or_create_session(source(n))
        populate_s = time.perf_counter() - started

        rng = random.Random(seed)
        picks = [source(rng.randrange(sessions)) for _ in range(calls)]
        timings_us: list[float] = []
        for src in picks:
            t0 = time.perf_counter_ns()
            result = engine.get_or_create_session(src)
            timings_us.append((time.perf_counter_ns() - t0) / 1000)
            if result.created:
                raise AssertionError(f"routing an existing key created a session: {result}")
    timings_us.sort()
    return {
        "sessions": sessions,
        "calls": calls,
        "populate_s": round(populate_s, 3),
        "p50_us": round(percentile(timings_us, 0.50), 1),
        "mean_us": round(statistics.fmean(timings_us), 1),
        "p99_us": round(percentile(timings_us, 0.99), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, action="append",
                        help="number of sessions to populate (repeat for several sizes; default 100 and 10000)")
    parser.add_argument("--calls", type=int, default=20000, help="timed routing calls per size")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random key choice")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    sizes = sorted(set(args.sessions or [100, 10000]))
    if any(s <= 0 for s in sizes) or args.calls <= 0:
        parser.error("--sessions and --calls must be positive")

    with tempfile.TemporaryDirectory(prefix="turnlog-bench-") as tmp:
        results = [measure(s, args.calls, args.seed, Path(tmp)) for s in sizes]
    smallest, largest = results[0], results[-1]
    ratio = {f"{name}_ratio": round(largest[f"{name}_us"] / smallest[f"{name}_us"], 2)
             for name in ("p50", "mean", "p99")}
    report = {"benchmark": "get_or_create_session on existing keys (touch_activity=True)",
              "python": sys.version.split()[0], "results": results,
              "largest_over_smallest": {"sessions": [smallest["sessions"], largest["sessions"]], **ratio}}

    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['benchmark']}, {args.calls} calls per size")
        print(f"{'sessions':>9} {'p50 µs':>9} {'mean µs':>9} {'p99 µs':>9} {'populate s':>11}")
        for r in results:
            print(f"{r['sessions']:>9} {r['p50_us']:>9} {r['mean_us']:>9} {r['p99_us']:>9} {r['populate_s']:>11}")
        print(f"{largest['sessions']} vs {smallest['sessions']} sessions: p50 x{ratio['p50_ratio']},"
              f" mean x{ratio['mean_ratio']}, p99 x{ratio['p99_ratio']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
