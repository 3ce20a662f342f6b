"""The standard workload (sequential, `turnlog bench`'s) with an agent that reads its history every
turn, as a real agent does; the bench's own agent never looks at it, and the engine reads the
history only for an agent that does. Prints turns/s and the CPU a turn; run it with two checkouts
alternated (`PYTHONPATH=/path/to/checkout`) to see what a change of the history read costs.

    .venv/bin/python benchmarks/bench_history_reads.py -S 200 -T 10 [--seed 1]
"""

from __future__ import annotations

import argparse
import shutil
import time

from turnlog import Turnlog
from turnlog.bench import prepare_workload, run_turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-S", "--sessions", type=int, default=200)
    parser.add_argument("-T", "--turns", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    home, db, rng, sources, order = prepare_workload(args.sessions, args.turns, args.seed, None)
    try:
        with Turnlog(db, owner="bench") as t:
            wall, cpu = time.perf_counter(), time.process_time()
            run_turns(t, sources, order, rng, lambda text: None, reads_history=True)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        shutil.rmtree(home, ignore_errors=True)
    turns = len(order)
    print(f"S={args.sessions} T={args.turns}: {turns / wall:.1f} turns/s, {cpu / turns * 1000:.3f} ms CPU a turn")


if __name__ == "__main__":
    main()
