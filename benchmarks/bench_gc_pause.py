#!/usr/bin/env python3
"""How long one full (generation-2) garbage collection is in a process like `turnlog bench`'s,
by EngineConfig.gc_mode: the bench's workload on S keys for N turns, then `gc.collect(2)` timed
three times as CPU time of the collecting thread (`time.thread_time`: a loaded machine's
preemption does not count).

    python benchmarks/bench_gc_pause.py default
    python benchmarks/bench_gc_pause.py between_turns      (alternate them in one sitting)

Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from turnlog.api import Turnlog  # noqa: E402
from turnlog.bench import GC_MODES, prepare_workload  # noqa: E402
from turnlog.config import EngineConfig  # noqa: E402
from turnlog.workload import assistant_text, user_text  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=GC_MODES)
    parser.add_argument("-S", "--sessions", type=int, default=1000)
    parser.add_argument("-N", "--turns", type=int, default=2000, help="turns run before the collections are timed")
    args = parser.parse_args()
    home, db, rng, sources, order = prepare_workload(args.sessions, max(1, -(-args.turns // args.sessions)), 1, None)
    t = Turnlog(db, owner="bench", config=EngineConfig(gc_mode=args.mode))
    for n in range(min(args.turns, len(order))):
        source = sources[order[n]]
        source.message_id = f"m{n}"
        reply, text = assistant_text(rng), user_text(rng, n)
        t.handle_message(source, text, lambda history, item, reply=reply: reply, lambda text: None)
    pauses = []
    for _ in range(3):
        c0 = time.thread_time()
        gc.collect(2)
        pauses.append(round((time.thread_time() - c0) * 1000, 1))
    print(f"{args.mode}: tracked objects {len(gc.get_objects())}, frozen {gc.get_freeze_count()},"
          f" one full collection (CPU ms) {pauses}")
    t.close()
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
