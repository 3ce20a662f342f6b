#!/usr/bin/env python3
"""What metrics and tracing cost a turn: the standard workload's turns (turnlog.workload) run in
blocks, each on a fresh store, with the four modes (off, metrics, traces, both) alternated block by
block so that a loaded machine's drift falls on every mode alike. Prints each mode's median CPU
time and wall time a turn over the blocks, and the cost against `off`.

    python benchmarks/bench_observability.py --blocks 6 --sessions 100 --turns 4 --json

CPU time (this process's) is the steadier figure when other work shares the machine. Metrics on:
`Turnlog.metrics()` called first (the histograms measured); traces on: the OpenTelemetry SDK
records every span, exported in batches to nowhere (turnlog.bench). Not a test.
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
from turnlog.bench import _discarding_tracer_provider  # noqa: E402
from turnlog.workload import assistant_text, build_sources, turn_order, user_text  # noqa: E402

MODES = {"off": (False, False), "metrics": (True, False), "traces": (False, True), "both": (True, True)}


def block(folder: str, sessions: int, turns: int, seed: int, metrics: bool, traces: bool) -> tuple[float, float]:
    """(CPU s, wall s) a turn over one block."""
    rng = random.Random(seed)
    sources = build_sources(sessions, rng)
    order = turn_order(sessions, turns, rng)
    provider = _discarding_tracer_provider() if traces else None
    t = Turnlog(str(Path(folder) / "bench.db"), owner="bench", tracer_provider=provider)
    if metrics:
        t.metrics()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for n, index in enumerate(order):
        source = sources[index]
        source.message_id = f"m{n}"
        reply = assistant_text(rng)
        t.handle_message(source, user_text(rng, n), lambda history, item: reply, lambda text: None)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if provider is not None:
        provider.shutdown()
    t.close()
    return cpu / len(order), wall / len(order)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    for b in range(args.blocks):
        for mode, (metrics, traces) in MODES.items():
            with tempfile.TemporaryDirectory(prefix="turnlog-obs-") as folder:
                runs[mode].append(block(folder, args.sessions, args.turns, args.seed + b, metrics, traces))
    result: dict[str, Any] = {"params": vars(args), "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "modes": {}}
    off_cpu = statistics.median(c for c, _ in runs["off"])
    for mode, values in runs.items():
        cpu = statistics.median(c for c, _ in values)
        wall = statistics.median(w for _, w in values)
        result["modes"][mode] = {"cpu_us_per_turn": round(cpu * 1e6, 1), "wall_us_per_turn": round(wall * 1e6, 1),
                                 "cpu_vs_off": round(cpu / off_cpu, 3),
                                 "cpu_us_added": round((cpu - off_cpu) * 1e6, 1)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for mode, m in result["modes"].items():
        print(f"{mode:8} CPU {m['cpu_us_per_turn']:8.1f} µs/turn  wall {m['wall_us_per_turn']:8.1f} µs/turn"
              f"  CPU ×{m['cpu_vs_off']} (+{m['cpu_us_added']} µs)")


if __name__ == "__main__":
    main()
