"""The standard workload (sequential, `turnlog bench`'s) with an agent that reads its history every
turn, as a real agent does; the bench's own agent never looks at it, and the engine reads the
history only for an agent that does. Prints turns/s and the CPU a turn; run it with two checkouts
alternated (`PYTHONPATH=/path/to/checkout`) to see what a change of the history read costs.

    .venv/bin/python benchmarks/bench_history_reads.py -S 200 -T 10 [--seed 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import shutil
import time

from turnlog import Turnlog
from turnlog.bench import prepare_workload
from turnlog.workload import assistant_text, user_text


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-S", "--sessions", type=int, default=200)
    parser.add_argument("-T", "--turns", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    home, db, rng, sources, order = prepare_workload(args.sessions, args.turns, args.seed, None)
    work = [(n, index, user_text(rng, n), assistant_text(rng)) for n, index in enumerate(order)]
    read = [0]
    try:
        with Turnlog(db, owner="bench") as t:
            wall, cpu = time.perf_counter(), cpu_s()
            for n, index, text, reply in work:
                def agent(history, item, reply=reply):  # type: ignore[no-untyped-def]
                    read[0] += len(history)
                    return reply
                t.handle_message(dataclasses.replace(sources[index], message_id=f"m{n}"), text, agent,
                                 lambda sent: None)
            wall, cpu = time.perf_counter() - wall, cpu_s() - cpu
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"S={args.sessions} T={args.turns}: {len(work) / wall:.1f} turns/s, {cpu / len(work) * 1000:.3f} ms CPU a turn,"
          f" {read[0] / len(work):.1f} history messages a turn")


if __name__ == "__main__":
    main()
