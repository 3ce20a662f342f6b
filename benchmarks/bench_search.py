"""Search and rebuild figures on the standard workload (not a test: it measures, it does not judge).

    python benchmarks/bench_search.py                       # S=1000 T=50 in a temporary folder
    python benchmarks/bench_search.py --workdir /tmp/tl      # keep /tmp/tl/bench.db and reuse it
    python benchmarks/bench_search.py --db some.db --json    # an existing turnlog database

Builds the workload's database with `turnlog bench` (turnlog.bench.run_bench) unless one is
given, then measures, each on the caught-up database:
- search: the workload's mix (shared/bench/WORKLOAD.md: English word, 3-character Chinese
  substring, quoted phrase; 20 hits each), `--searches` queries per round, `--rounds` rounds;
- fts_rebuild: rebuilding the search projection (both full-text indexes) from the log;
- rebuild_all: rebuilding every projection from the log, in events per second.
Goals (issue 5): rebuild_all >= 50,000 events/s; search p50 <= 5 ms at S=1000 T=50.
The machine's load average is printed with the figures: other processes skew them.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from turnlog.api import Turnlog  # noqa: E402
from turnlog.bench import run_bench  # noqa: E402
from turnlog.search_timing import run_search_mix  # noqa: E402

REBUILD_GOAL = 50_000
SEARCH_GOAL_MS = 5.0


def build(sessions: int, turns: int, seed: int, workdir: str) -> tuple[str, float]:
    db = os.path.join(workdir, "bench.db")
    if os.path.exists(db):
        return db, 0.0
    t0 = time.perf_counter()
    print(f"building the workload: {sessions} sessions x {turns} turns in {workdir} ...", file=sys.stderr)
    run_bench(sessions, turns, seed, workdir=workdir)
    return db, time.perf_counter() - t0


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure(db: str, searches: int, rounds: int, seed: int) -> dict:
    out: dict = {"db": db, "load_before": load()}
    with Turnlog(db, owner="bench-search") as t:
        t0 = time.perf_counter()
        t.maintenance.catch_up()
        out["catch_up_s"] = round(time.perf_counter() - t0, 3)
        status = t.maintenance.projection_status()
        out["events"] = status[0].head
        conn = sqlite3.connect(db)
        out["messages"] = conn.execute("SELECT count(*) FROM search_messages").fetchone()[0]
        conn.close()

        mixes = [run_search_mix(t, searches=searches, seed=seed) for _ in range(rounds)]
        out["search"] = {"rounds": [m["p50_ms"] for m in mixes],
                         "p50_ms": round(statistics.median(m["p50_ms"] for m in mixes), 3),
                         "p99_ms": round(statistics.median(m["p99_ms"] for m in mixes), 3),
                         "by_kind": mixes[-1]["by_kind"]}

        t0 = time.perf_counter()
        fts = t.maintenance.rebuild(["search"])
        out["fts_rebuild"] = {"seconds": round(time.perf_counter() - t0, 3), "events_read": fts["events"]}

        out["load_mid"] = load()
        c0 = time.process_time()
        t0 = time.perf_counter()
        report = t.maintenance.rebuild()
        wall = time.perf_counter() - t0
        out["rebuild_all"] = {"seconds": round(wall, 3), "cpu_seconds": round(time.process_time() - c0, 3),
                              "events": report["events"], "events_per_s": round(report["events"] / wall),
                              "projections": report["projections"]}
        out["search_after_rebuild_p50_ms"] = run_search_mix(t, searches=searches, seed=seed)["p50_ms"]
    out["load_after"] = load()
    out["goals"] = {"rebuild_all_events_per_s>=50000": out["rebuild_all"]["events_per_s"] >= REBUILD_GOAL,
                    "search_p50_ms<=5": out["search"]["p50_ms"] <= SEARCH_GOAL_MS}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", "-S", type=int, default=1000)
    ap.add_argument("--turns", "-T", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", help="Keep (and reuse) DIR/bench.db here; default: a temporary folder.")
    ap.add_argument("--db", help="Measure this turnlog database instead of building one.")
    ap.add_argument("--searches", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    temp = None
    built_s = 0.0
    if args.db:
        db = args.db
    else:
        workdir = args.workdir or (temp := tempfile.mkdtemp(prefix="turnlog-bench-search-"))
        os.makedirs(workdir, exist_ok=True)
        db, built_s = build(args.sessions, args.turns, args.seed, workdir)
    try:
        result = {"bench": "search", "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
                  "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                  "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "params": {"sessions": args.sessions, "turns": args.turns, "seed": args.seed,
                             "searches": args.searches, "rounds": args.rounds},
                  "build_s": round(built_s, 1), **measure(db, args.searches, args.rounds, args.seed)}
    finally:
        if temp:
            shutil.rmtree(temp, ignore_errors=True)
    if args.json:
        print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        return 0
    s, r = result["search"], result["rebuild_all"]
    print(f"database: {result['events']} events, {result['messages']} messages ({result['db']})")
    print(f"search mix: p50 {s['p50_ms']} ms (rounds {s['rounds']}), p99 {s['p99_ms']} ms; by kind "
          + ", ".join(f"{k} {v['p50_ms']} ms/{v['mean_hits']} hits" for k, v in s["by_kind"].items()))
    print(f"fts rebuild (search projection): {result['fts_rebuild']['seconds']} s")
    print(f"rebuild all projections: {r['events']} events in {r['seconds']} s = {r['events_per_s']:,} events/s"
          f" (cpu {r['cpu_seconds']} s)")
    print(f"load average before/mid/after: {result['load_before']} / {result['load_mid']} / {result['load_after']}"
          f" on {result['machine']['cpus']} cpus")
    print("goals: " + ", ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in result["goals"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
