"""CPU cost of reading a log's transcript messages back: the mapper's decode (to_domain_event) of
every MessageAppended of a bench database (`turnlog bench --workdir DIR` leaves DIR/bench.db), in
CPU time, best of `--rounds`. Run it with one checkout on logs written by two (before/after a
change of the stored form), alternating, to see what the form costs a reader.

    .venv/bin/python benchmarks/bench_message_decode.py DIR/bench.db [DIR2/bench.db ...] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time

from turnlog import Turnlog


def decode_cost(db: str, rounds: int) -> tuple[int, float]:
    t = Turnlog(db, owner="bench-decode")
    try:
        app = t._app  # noqa: SLF001 - a benchmark of the storage edge itself
        rows, start = [], 1
        while True:
            batch = app.recorder.select_notifications(start, 5000, topics=["turnlog:MessageAppended"])
            rows += batch
            if len(batch) < 5000:
                break
            start = batch[-1].id + 1
        best = float("inf")
        for _ in range(rounds):
            t0 = time.process_time()
            for n in rows:
                app.mapper.to_domain_event(n)
            best = min(best, time.process_time() - t0)
        return len(rows), best
    finally:
        t.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dbs", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for db in args.dbs:
        n, best = decode_cost(db, args.rounds)
        print(f"{db}: {n} messages, {best:.3f} s CPU, {best / max(n, 1) * 1e6:.1f} µs a message (best of {args.rounds})")


if __name__ == "__main__":
    main()
