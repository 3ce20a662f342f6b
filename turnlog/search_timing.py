"""The workload's search phase, timed (shared/bench/WORKLOAD.md "After the turns").

Round robin over three kinds (an English word, a 3-character Chinese substring, a quoted English
phrase), each query drawn with Random(seed + 1) as the reference script draws it, 20 hits each.
Used by `turnlog bench` and benchmarks/bench_search.py.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import TYPE_CHECKING, Any

from .workload import SEARCH_EN, SEARCH_PHRASE, SEARCH_ZH

if TYPE_CHECKING:
    from .api import Turnlog

KINDS = [("en_word", SEARCH_EN), ("zh_3char", SEARCH_ZH), ("phrase", SEARCH_PHRASE)]
LIMIT = 20


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[max(0, min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1)))))]


def run_search_mix(t: "Turnlog", searches: int = 100, seed: int = 1) -> dict[str, Any]:
    t.maintenance.catch_up()  # searching is timed, catching up is not
    rng = random.Random(seed + 1)
    per: dict[str, list[float]] = {kind: [] for kind, _ in KINDS}
    hits: dict[str, list[int]] = {kind: [] for kind, _ in KINDS}
    every: list[float] = []
    for i in range(searches):
        kind, pool = KINDS[i % len(KINDS)]
        query = rng.choice(pool)
        t0 = time.perf_counter()
        found = t.search(query, limit=LIMIT)
        ms = (time.perf_counter() - t0) * 1000
        per[kind].append(ms)
        hits[kind].append(len(found))
        every.append(ms)
    return {
        "n": searches, "limit": LIMIT, "p50_ms": round(_pct(every, 50), 3), "p99_ms": round(_pct(every, 99), 3),
        "by_kind": {kind: {"n": len(v), "p50_ms": round(_pct(v, 50), 3),
                           "mean_hits": round(statistics.fmean(hits[kind]), 2)} for kind, v in per.items() if v},
    }
