#!/usr/bin/env python3
"""Page-load times of `turnlog web` on a database made by `turnlog bench` (issue 15: p95 < 200 ms
on the S=1000 T=50 one).

    turnlog bench -S 1000 -T 50 --workdir /tmp/wb   # keeps /tmp/wb/bench.db
    python benchmarks/bench_web.py /tmp/wb/bench.db --loads 30 --json

Each page (HTML, and its ?format=json twin) is loaded --loads times through the ASGI test client
(the app, not the network), with seeded random sessions, positions and search words; the first
load of each page is not counted in the percentiles but shown as `first` (the plot is computed
once per opened log and then cached, a cost reported separately as `plot_first_load_ms`). Prints
p50/p95/max per page and over all loads.

Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from urllib.parse import quote
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from starlette.testclient import TestClient  # noqa: E402

from turnlog.bench import percentile  # noqa: E402
from turnlog.workload import SEARCH_EN, SEARCH_ZH  # noqa: E402
from turnlog.web.app import create_app  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("--loads", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    app = create_app(args.db)
    open_s = time.perf_counter() - t0
    with TestClient(app, base_url="http://127.0.0.1") as client:
        sessions = client.get("/sessions?format=json&page=1").json()["sessions"]
        head = client.get("/travel?format=json").json()["head"]
        t0 = time.perf_counter()
        assert client.get("/plot").status_code == 200
        plot_first = (time.perf_counter() - t0) * 1000
        words = SEARCH_EN + SEARCH_ZH  # the bench's own search mix: words the workload wrote

        def pick_session() -> str:
            return rng.choice(sessions)["session_id"]

        def pick_key() -> str:
            return rng.choice(sessions)["session_key"]

        pages: dict[str, Callable[[], str]] = {
            "gateway now": lambda: "/",
            "sessions": lambda: f"/sessions?page={rng.randint(1, 10)}",
            "sessions search": lambda: f"/sessions?q={quote(rng.choice(words))}",
            "session": lambda: f"/sessions/{pick_session()}",
            "session at event": lambda: f"/sessions/{pick_session()}/at/{rng.randint(1, head)}",
            "time travel": lambda: f"/travel?at=%23{rng.randint(1, head)}",
            "time travel, one key": lambda: f"/travel?at=%23{rng.randint(1, head)}&key={quote(pick_key())}",
            "diff (100 events)": lambda: (lambda b: f"/travel/diff?a=%23{b - 100}&b=%23{b}")(
                rng.randint(101, head)),
            "diff (100 events, one key)": lambda: (lambda b: f"/travel/diff?a=%23{b - 100}&b=%23{b}"
                                                   f"&key={quote(pick_key())}")(rng.randint(101, head)),
            "integrity": lambda: "/integrity",
            "plot": lambda: "/plot",
        }
        results: dict[str, Any] = {}
        every: list[float] = []
        wide: list[float] = []
        for name, make in pages.items():
            for fmt in ("", "json"):
                times = []
                loads = min(args.loads, 8) if name.startswith("diff (100 events)") else args.loads
                for n in range(loads + 1):
                    path = make()
                    if fmt:
                        path += ("&" if "?" in path else "?") + "format=json"
                    t0 = time.perf_counter()
                    response = client.get(path)
                    elapsed = (time.perf_counter() - t0) * 1000
                    if response.status_code != 200:
                        raise SystemExit(f"{path}: {response.status_code} {response.text[:200]}")
                    if n:  # the first load warms caches
                        times.append(elapsed)
                    else:
                        first = elapsed
                (wide if name == "diff (100 events)" else every).extend(times)
                results[f"{name}{' (json)' if fmt else ''}"] = {
                    "p50_ms": round(percentile(times, 50), 1), "p95_ms": round(percentile(times, 95), 1),
                    "max_ms": round(max(times), 1), "first_ms": round(first, 1)}
    out = {"db": args.db, "events": head, "sessions_listed_first_page": len(sessions), "loads_per_page": args.loads,
           "open_s": round(open_s, 2), "plot_first_load_ms": round(plot_first, 1), "pages": results,
           "all": {"p50_ms": round(percentile(every, 50), 1), "p95_ms": round(percentile(every, 95), 1),
                   "max_ms": round(max(every), 1), "loads": len(every)},
           "diff_all_keys": {"p50_ms": round(percentile(wide, 50), 1), "p95_ms": round(percentile(wide, 95), 1)}}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for name, r in results.items():
            print(f"{name:<28} p50 {r['p50_ms']:>7} ms  p95 {r['p95_ms']:>7} ms  max {r['max_ms']:>7} ms"
                  f"  first {r['first_ms']:>7} ms")
        print(f"all {out['all']['loads']} loads but the all-keys diff: p50 {out['all']['p50_ms']} ms,"
              f" p95 {out['all']['p95_ms']} ms;"
              f" open {out['open_s']} s; plot first load {out['plot_first_load_ms']} ms")


if __name__ == "__main__":
    main()
