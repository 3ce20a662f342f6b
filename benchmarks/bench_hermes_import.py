#!/usr/bin/env python3
"""Import speed of `import-hermes`, in messages per second, on a generated Hermes home.

The home is the real Hermes 0.19.0 fixture (../shared/fixtures/hermes-home-v019) grown by
copying its session and message rows under new ids (tests/harness/hermes_home.py) to about
--messages rows; each run imports it into a fresh SQLite store. Prints the best and median of
--runs runs (the import only: reading the home and saving the events, in batches, through the
application's save; the read models catch up later, on the first read).

    python benchmarks/bench_hermes_import.py --messages 100000 --runs 3 --json

Not a test: timings depend on the machine and on what else runs on it (the load average is
printed with the figures).

--split adds one more run, timed by part (CPU microseconds per message row): `save` (the
application's save of each batch), of which `encode` (the library's mapper, of which turnlog's
`transcode` and `compress`) and `write` (the recorder: INSERTs, the hash chain, the commit);
and `importer` (everything else: reading the home and deciding the events). The timers add
about a microsecond per event to `save`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "tests"))

from harness.hermes_home import grown_home  # noqa: E402

from turnlog import ManualClock, Turnlog  # noqa: E402

FIXTURE_MESSAGES = 123


def _timed(spent: dict[str, float], name: str, call: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return call(*args, **kwargs)
        finally:
            spent[name] += time.process_time() - start
    return wrapper


def split_run(home: Path, db: Path) -> dict[str, Any]:
    """CPU microseconds per message row, by part (see the module's docstring)."""
    spent = dict.fromkeys(("save", "encode", "transcode", "compress", "write"), 0.0)
    with Turnlog(str(db), clock=ManualClock()) as t:
        # The store's own parts, timed from inside: no public name reaches them (Turnlog.ctx, its old
        # name, is deprecated), so the private ones.
        app = t._app
        mapper, recorder = app.mapper, app.recorder
        # Instance attributes shadow the bound methods the library calls (events.put, the mapper).
        mapper.transcoder.encode = _timed(spent, "transcode", mapper.transcoder.encode)  # type: ignore[method-assign]
        assert mapper.compressor is not None
        mapper.compressor.compress = _timed(spent, "compress", mapper.compressor.compress)  # type: ignore[method-assign]
        mapper.to_stored_event = _timed(spent, "encode", mapper.to_stored_event)  # type: ignore[method-assign]
        recorder.insert_events = _timed(spent, "write", recorder.insert_events)  # type: ignore[method-assign]
        t._ctx.save = _timed(spent, "save", t._ctx.save)  # type: ignore[method-assign]
        cpu = time.process_time()
        report = t.import_hermes(home)
        cpu = time.process_time() - cpu
        events = app.recorder.max_notification_id() or 0
    rows = report.messages_imported + report.inactive_rows_kept + report.marker_rows_kept
    per_row = {name: round(1e6 * value / rows, 1) for name, value in spent.items()}
    per_row["importer"] = round(1e6 * (cpu - spent["save"]) / rows, 1)
    per_row["total"] = round(1e6 * cpu / rows, 1)
    return {"cpu_us_per_row": per_row, "events": events, "events_per_row": round(events / rows, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--split", action="store_true", help="one more run, timed by part (see above)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="turnlog-bench-hermes-") as tmp:
        home = grown_home(Path(tmp) / "home", copies=max(0, round(args.messages / FIXTURE_MESSAGES) - 1))
        rates, seconds, cpu_rates = [], [], []
        for run in range(args.runs):
            with Turnlog(str(Path(tmp) / f"run{run}.db"), clock=ManualClock()) as t:
                start, cpu = time.perf_counter(), time.process_time()
                report = t.import_hermes(home)
                elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            rows = report.messages_imported + report.inactive_rows_kept + report.marker_rows_kept  # every row
            seconds.append(elapsed)
            rates.append(rows / elapsed)
            cpu_rates.append(rows / cpu)
        result = {"messages": rows, "into_transcripts": report.messages_imported,
                  "sessions": report.sessions_imported, "runs": args.runs,
                  "best_msgs_per_s": round(max(rates)), "median_msgs_per_s": round(statistics.median(rates)),
                  "best_s": round(min(seconds), 2),
                  # this process's CPU time only: the machine's load does not inflate it
                  "msgs_per_cpu_s": round(statistics.median(cpu_rates)),
                  "load_average": [round(x, 2) for x in os.getloadavg()]}
        if args.split:
            result["split"] = split_run(home, Path(tmp) / "split.db")
    if args.json:
        print(json.dumps(result))
    else:
        for name, value in result.items():
            print(f"{name}: {value}")


if __name__ == "__main__":
    main()
