#!/usr/bin/env python3
"""Soak the crash recovery: the kill -9 harness of tests/harness for many rounds.

Each round starts a child gateway process (start_gateway -> sweep_deliveries -> resume_interrupted
-> pending_inbound -> scripted traffic on several keys and platforms, /queue items, wake-ups, one
looping key whose agent always hangs) and SIGKILLs it after a random delay unless it drained and
exited first; a final clean run settles what is left and the invariants are checked from the event
log and the fake adapter's send file (see tests/harness/checker.py). Prints

    rounds=N kills=K violations=V

then the run's statistics, and each violation if any. Exit code 1 if there is a violation.

    python benchmarks/kill9_soak.py --rounds 500 [--seed 1] [--workdir DIR]

Not a test of speed: about a second per round. The traffic and the kill delays are seeded; where
exactly a kill lands depends on the machine, which is the point of a soak.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # run from a checkout without installing

from harness.runner import run_harness  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="kill -9 soak of turnlog's crash recovery")
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", default=None, help="keep the database and the send file here")
    parser.add_argument("--progress", action="store_true", help="print a line every 50 rounds")
    args = parser.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="turnlog-kill9-soak-")

    def progress(done: int, total: int, kills: int) -> None:
        if args.progress and (done % 50 == 0 or done == total):
            print(f"  {done}/{total} rounds, {kills} kills", file=sys.stderr, flush=True)

    result = run_harness(args.rounds, args.seed, workdir, progress=progress)
    print(result.summary())
    print(result.details())
    print(f"workdir={workdir}")
    for violation in result.violations:
        print(f"violation: {violation}")
    return 1 if result.violations else 0


if __name__ == "__main__":
    sys.exit(main())
