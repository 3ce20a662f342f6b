"""The parent of the kill -9 harness: rounds of child gateways killed at random, a clean final run,
then the invariant check. `python -m harness.runner --rounds N` prints `rounds=N kills=K violations=V`.

Each round starts a child (see child.py) at a virtual time the parent chooses: boots are usually
a minute or more apart, sometimes seconds apart, so that some boots are boot storms. The parent
SIGKILLs the child a random delay after it reports that it is booting (so that slow imports on a
loaded machine do not eat the window) unless it has exited by itself (its script chunk done,
drained). Every third round a second live gateway (another name, child.py --serve) runs beside
the main one and is killed with it; before the final run of the main gateway, the second one has
a clean final run of its own. Everything is deterministic from the seed except where the kill lands.
"""

from __future__ import annotations

import argparse
import os
import random
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

from .checker import Report, check
from .procs import child_env

START = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
CHUNK = 6  # scripted steps added per round
GAPS_S = (0, 5, 5, 60, 90, 240)  # virtual time between one round's end and the next boot
ROUND_SPAN_S = 10  # a child's own clock moves at most this much
KILL_WINDOW_S = (0.0, 1.0)  # after the child says it is booting (imports done)
BOOT_TIMEOUT_S = 60.0
SECOND_GATEWAY = "harness-b"
SECOND_EVERY = 3  # rounds with two live gateways
FINAL_TIMEOUT_S = 120.0


@dataclass
class Result:
    rounds: int
    kills: int
    report: Report
    child_errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def violations(self) -> list[str]:
        return self.child_errors + self.report.violations

    def summary(self) -> str:
        return f"rounds={self.rounds} kills={self.kills} violations={len(self.violations)}"

    def details(self) -> str:
        stats = " ".join(f"{k}={v}" for k, v in sorted(self.report.stats.items()))
        return f"{stats} seconds={self.seconds:.1f}"


def _child(db: Path, sent: Path, seed: int, round_no: int, at: datetime, upto: int, length: int,
           final: bool, serve: str | None = None, anchor: float | None = None,
           shared: bool = False) -> subprocess.Popen:
    argv = [sys.executable, "-m", "harness.child", str(db), str(sent), str(seed), str(round_no), at.isoformat(),
            str(upto), str(length)] + (["--final"] if final else []) + (["--serve", serve] if serve else []) + \
        (["--shared"] if shared else []) + \
        ["--anchor", repr(anchor if anchor is not None else time.time())]
    return subprocess.Popen(argv, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _last_line(err: str) -> str:
    """The exception line of a child's traceback (run with --workdir and the child by hand for more)."""
    lines = [line for line in err.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def _wait_booting(proc: subprocess.Popen) -> None:
    """Until the child has imported everything and is about to start its gateway (or has died)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], BOOT_TIMEOUT_S)
    if ready:
        proc.stdout.readline()


def _final_run(proc: subprocess.Popen, what: str) -> list[str]:
    """Wait for a final (never killed) child; the errors it leaves, if any."""
    try:
        _, err_b = proc.communicate(timeout=FINAL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return [f"{what} did not finish"]
    if proc.returncode != 0:
        return [f"{what} exited with {proc.returncode}: {_last_line(err_b.decode())}"]
    return []


def run_harness(rounds: int, seed: int = 1, workdir: str | os.PathLike[str] | None = None,
                progress: Callable[[int, int, int], None] | None = None) -> Result:
    began = time.monotonic()
    work = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="turnlog-kill9-"))
    work.mkdir(parents=True, exist_ok=True)
    db, sent = work / "gateway.db", work / "sent.jsonl"
    rng = random.Random(f"turnlog-kill9-parent:{seed}")
    length = rounds * CHUNK
    at = START
    kills = 0
    errors: list[str] = []
    second_ran = False
    for r in range(rounds):
        anchor = time.time()
        two = r % SECOND_EVERY == 1
        proc = _child(db, sent, seed, r, at, min(length, (r + 1) * CHUNK), length, final=False, anchor=anchor,
                      shared=two)
        procs = [proc]
        if two:
            procs.append(_child(db, sent, seed, r, at, 0, length, final=False, serve=SECOND_GATEWAY, anchor=anchor))
            second_ran = True
        delay = rng.uniform(*KILL_WINDOW_S)
        for p in procs:
            _wait_booting(p)
        for p in procs:
            try:
                p.wait(timeout=delay if p is proc else 0.0)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
                p.wait()
                kills += 1
            err = p.stderr.read().decode() if p.stderr else ""
            for pipe in (p.stdout, p.stderr):  # read or not, ours to close (else a ResourceWarning each)
                if pipe is not None:
                    pipe.close()
            if p.returncode not in (0, -signal.SIGKILL):
                errors.append(f"round {r}: child exited with {p.returncode}: {_last_line(err)}")
            elif p.returncode == -signal.SIGKILL and "Traceback" in err:
                errors.append(f"round {r}: child failed before the kill: {_last_line(err)}")
        at += timedelta(seconds=ROUND_SPAN_S + rng.choice(GAPS_S))
        if progress is not None:
            progress(r + 1, rounds, kills)
    at += timedelta(seconds=ROUND_SPAN_S + 90)
    if second_ran:  # the second gateway's own clean final run: it recovers its killed boots
        errors += _final_run(_child(db, sent, seed, rounds, at, length, length, final=True, serve=SECOND_GATEWAY),
                             "the second gateway's final run")
        at += timedelta(seconds=5)
    errors += _final_run(_child(db, sent, seed, rounds, at, length, length, final=True), "the final clean run")
    report = check(str(db), str(sent))
    return Result(rounds, kills, report, errors, time.monotonic() - began)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", default=None, help="keep the database and send file here")
    parser.add_argument("--verbose", "-v", action="store_true", help="print each violation and the statistics")
    args = parser.parse_args(argv)
    result = run_harness(args.rounds, args.seed, args.workdir)
    print(result.summary())
    if args.verbose or result.violations:
        print(result.details())
        for v in result.violations:
            print(f"  violation: {v}")
    return 1 if result.violations else 0


if __name__ == "__main__":
    sys.exit(main())
