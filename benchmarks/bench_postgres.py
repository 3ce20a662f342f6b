#!/usr/bin/env python3
"""The standard workload on PostgreSQL beside SQLite, and a new node joining a big PostgreSQL log.

A throwaway local server is started the way tests/postgres_server.py starts one (initdb into a
temporary folder, a Unix socket only). synchronous_commit stays on: a commit has reached the
server's write-ahead log (the operating system's cache) before the turn goes on. `--fsync off`
(the default, as the tests' server) does not flush that log to the disk at each commit, which is
what SQLite does at turnlog's default `synchronous=NORMAL` in WAL mode (storage/sqlite_factory.py):
a killed process loses nothing, a power cut may lose the last commits. `--fsync on` flushes at
every commit (SQLite's `TURNLOG_SQLITE_SYNCHRONOUS=FULL`).

    python benchmarks/bench_postgres.py workload -S 200 -T 5 --rounds 2
        SQLite, PostgreSQL with one gateway process, with two gateway processes (the sessions
        dealt between them: different keys, one log), alternated; turns/s and p99 per turn.
    python benchmarks/bench_postgres.py join --events 1000000
        builds a log of about that many events (the workload into SQLite, then `copy_to` the
        server), then times a new gateway node (an empty local read-model file) from opening the
        log to its first turn served.

Not a test: timings depend on the machine (quote `uptime` beside them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from tests import postgres_server  # noqa: E402
from turnlog.api import Turnlog  # noqa: E402
from turnlog.bench import percentile, prepare_workload  # noqa: E402
from turnlog.workload import assistant_text, user_text  # noqa: E402


def local_server(fsync: str) -> Any:
    """tests/postgres_server.server, with fsync as asked (the tests' is off)."""
    if fsync == "on":
        original = subprocess.run

        def run(args: list[str], **kw: Any) -> Any:
            return original([a.replace("-c fsync=off", "-c fsync=on") for a in args], **kw)

        postgres_server.subprocess.run = run  # type: ignore[assignment]
    return postgres_server.server()


def run_lane(location: str, views: str | None, sessions: int, turns: int, seed: int, lane: int, lanes: int,
             owner: str) -> dict[str, Any]:
    """This process's share of the workload: the sessions i with i % lanes == lane."""
    scratch = tempfile.mkdtemp(prefix="turnlog-pgb-")  # prepare_workload's folder: the log is elsewhere
    _, _, rng, sources, order = prepare_workload(sessions, turns, seed, scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    work = []
    for n, index in enumerate(order):
        reply, text = assistant_text(rng), user_text(rng, n)
        if index % lanes == lane:
            work.append((n, index, text, reply))
    t = Turnlog(location, views=views, owner=owner)
    latencies = []
    start = time.perf_counter()
    for n, index, text, reply in work:
        source = sources[index]
        source.message_id = f"m{n}"
        t0 = time.perf_counter()
        t.handle_message(source, text, lambda history, item, reply=reply: reply, lambda text: None)
        latencies.append((time.perf_counter() - t0) * 1000)
    wall = time.perf_counter() - start
    t.close()
    return {"turns": len(work), "wall_s": wall, "latencies_ms": latencies, "started": start}


def summary(name: str, turns: int, wall: float, latencies: list[float]) -> dict[str, Any]:
    return {"run": name, "turns": turns, "turns_per_s": round(turns / wall, 1),
            "p50_ms": round(percentile(latencies, 50), 2), "p99_ms": round(percentile(latencies, 99), 2)}


def workload(args: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    with local_server(args.fsync) as prefix:
        for r in range(args.rounds):
            home = Path(tempfile.mkdtemp(prefix="turnlog-pgb-"))
            try:
                lane = run_lane(str(home / "sqlite.db"), None, args.sessions, args.turns, args.seed, 0, 1, "sqlite")
                out.append(summary("sqlite", lane["turns"], lane["wall_s"], lane["latencies_ms"]))
                url = postgres_server.create_database(prefix, f"one{r}")
                lane = run_lane(url, str(home / "one.views"), args.sessions, args.turns, args.seed, 0, 1, "pg-one")
                out.append(summary("postgresql, 1 gateway", lane["turns"], lane["wall_s"], lane["latencies_ms"]))
                url = postgres_server.create_database(prefix, f"two{r}")
                Turnlog(url, views=str(home / "warm.views")).close()  # the schema made once, before the clock
                out.append(two_processes(url, home, args))
            finally:
                shutil.rmtree(home, ignore_errors=True)
            print(json.dumps(out[-3:]), file=sys.stderr)
    return out


def two_processes(url: str, home: Path, args: argparse.Namespace) -> dict[str, Any]:
    procs = [subprocess.Popen([sys.executable, __file__, "lane", url, str(home / f"lane{i}.views"),
                               str(args.sessions), str(args.turns), str(args.seed), str(i), "2"],
                              stdout=subprocess.PIPE, text=True) for i in range(2)]
    results = [json.loads(p.communicate()[0]) for p in procs]
    # Both run at once: from the first one's start to the last one's end.
    first = min(r["started_wall"] for r in results)
    last = max(r["started_wall"] + r["wall_s"] for r in results)
    latencies = [x for r in results for x in r["latencies_ms"]]
    return summary("postgresql, 2 gateway processes", sum(r["turns"] for r in results), last - first, latencies)


def lane_main(argv: list[str]) -> None:
    url, views, sessions, turns, seed, lane, lanes = argv
    result = run_lane(url, views, int(sessions), int(turns), int(seed), int(lane), int(lanes), f"pg-lane{lane}")
    result["started_wall"] = time.time() - result["wall_s"]
    print(json.dumps(result))


def join(args: argparse.Namespace) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="turnlog-pgj-"))
    report: dict[str, Any] = {}
    try:
        sessions = args.sessions
        turns = max(1, round(args.events / 14 / sessions))  # ~14 events a turn
        db = args.log or str(home / "big.db")
        if not os.path.exists(db):  # else built by an earlier run
            t0 = time.perf_counter()
            run_lane(db, None, sessions, turns, args.seed, 0, 1, "builder")
            report["build_sqlite_s"] = round(time.perf_counter() - t0, 1)
        with local_server(args.fsync) as prefix:
            url = postgres_server.create_database(prefix, "big")
            with Turnlog(db) as t:
                events = t.maintenance.log_head()
                t0 = time.perf_counter()
                t.copy_to(url, views=str(home / "copy.views"))
                report["copy_s"] = round(time.perf_counter() - t0, 1)
            report["events"] = events
            # The new node: an empty local read-model file, then one message on a new key.
            # The new node: an empty local read-model file; it boots (start_gateway: recovery reads
            # the read models) and serves a message on a key the log already holds.
            from tests.chat import alice
            for boot in (False, True):
                t0 = time.perf_counter()
                node = Turnlog(url, views=str(home / f"new-node-{boot}.views"), owner=f"new-node-{boot}")
                steps = {"open_s": round(time.perf_counter() - t0, 2)}
                if boot:
                    node.start_gateway("node")
                    steps["booted_s"] = round(time.perf_counter() - t0, 2)
                node.handle_message(alice(f"first-{boot}"), "hello", lambda history, item: "hi", lambda text: None)
                steps["first_turn_served_s"] = round(time.perf_counter() - t0, 2)
                node.close()
                report["new_node_with_boot" if boot else "new_node_without_boot"] = steps
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return report


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "lane":
        return lane_main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    w = sub.add_parser("workload", help="SQLite vs PostgreSQL with one and two gateway processes")
    w.add_argument("-S", "--sessions", type=int, default=200)
    w.add_argument("-T", "--turns", type=int, default=5)
    w.add_argument("--seed", type=int, default=1)
    w.add_argument("--rounds", type=int, default=2, help="alternations of the three runs")
    j = sub.add_parser("join", help="a new node's first turn on a big PostgreSQL log")
    j.add_argument("--events", type=int, default=1_000_000)
    j.add_argument("-S", "--sessions", type=int, default=2000)
    j.add_argument("--seed", type=int, default=1)
    j.add_argument("--log", help="the SQLite log to copy: built here when missing, kept (for another run)")
    for p in (w, j):
        p.add_argument("--fsync", choices=("off", "on"), default="off",
                       help="the server flushes its log to the disk at each commit (SQLite's FULL) or not (NORMAL's)")
    args = parser.parse_args()
    result = workload(args) if args.what == "workload" else join(args)
    print(json.dumps({"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count(),
                      "result": result}, indent=1))


if __name__ == "__main__":
    main()
