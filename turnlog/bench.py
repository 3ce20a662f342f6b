"""`turnlog bench`: the standard workload through the real gateway path, measured.

Each turn is what a gateway does for one message: accept it durably, route it, take the turn
lease while starting the turn with the user message, record the reply with its delivery
obligation, attempt and settle the delivery, release the lease. Per-turn latency is the wall
time of all of that.
"""

from __future__ import annotations

import gc
import os
import platform as _platform
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from typing import Any, Callable

from .api import Turnlog
from .config import GC_BETWEEN_TURNS, GC_MODES, EngineConfig
from .gc_turns import in_turn
from .search_timing import run_search_mix
from .workload import assistant_text, build_sources, turn_order, user_text

Progress = Callable[[int, int], None]


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def dir_bytes(root: str) -> int:
    total = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            try:
                total += os.path.getsize(os.path.join(dirpath, name))
            except OSError:
                pass
    return total


ACCEPTS = 500  # messages accepted (not run) at the end, to time what a webhook waits for before its ack


def accept_latencies(t: Turnlog, sources: list[Any], rng: random.Random) -> list[float]:
    """The wall time of `accept` alone, in ms: the durable record a webhook handler acknowledges
    after (the turn runs later), on the workload's keys."""
    out = []
    for n in range(ACCEPTS):
        source = sources[rng.randrange(len(sources))]
        source.message_id = f"accept-{n}"
        t0 = time.perf_counter()
        t.accept(source, user_text(rng, n))
        out.append((time.perf_counter() - t0) * 1000)
    return out


def prepare_workload(sessions: int, turns: int, seed: int, workdir: str | None
                     ) -> tuple[str, str, random.Random, list[Any], list[int]]:
    """The folder and fresh database of a run, its randomness, sources and turn order."""
    home = workdir or tempfile.mkdtemp(prefix="turnlog-bench-")
    os.makedirs(home, exist_ok=True)
    db = os.path.join(home, "bench.db")
    if os.path.exists(db):
        raise ValueError(f"{db} exists: the benchmark needs a fresh database")
    rng = random.Random(seed)
    return home, db, rng, build_sources(sessions, rng), turn_order(sessions, turns, rng)


def run_turns(t: Turnlog, sources: list[Any], order: list[int], rng: random.Random, send: Callable[..., Any], *,
              after_turn: Callable[[], Any] | None = None, progress: Progress | None = None,
              every: int = 100, reads_history: bool = False) -> list[float]:
    """The workload's turns, one after another through `handle_message`; the wall time of each, in
    seconds. `after_turn` runs outside the timing (e.g. a clock advanced); `progress` every `every` turns.
    `reads_history`: the agent looks at every message of its history, as a real agent does (the
    engine reads the history only for an agent that looks)."""
    latencies = []
    for n, index in enumerate(order):
        source = sources[index]
        source.message_id = f"m{n}"
        reply = assistant_text(rng)
        text = user_text(rng, n)
        t0 = time.perf_counter()
        t.handle_message(source, text, _reading_agent(reply) if reads_history else lambda history, item: reply, send)
        latencies.append(time.perf_counter() - t0)
        if after_turn is not None:
            after_turn()
        if progress is not None and (n + 1) % every == 0:
            progress(n + 1, len(order))
    return latencies


def _reading_agent(reply: str) -> Callable[[Any, Any], str]:
    def agent(history: Any, item: Any) -> str:
        for _ in history:
            pass
        return reply
    return agent


class FullCollections:
    """The full (generation-2) garbage collections while it is on (`gc.callbacks`): how long each
    took, and whether a turn was running (turnlog.gc_turns.in_turn)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, bool]] = []
        self._start = 0.0

    def __enter__(self) -> "FullCollections":
        gc.callbacks.append(self._probe)
        return self

    def __exit__(self, *exc: Any) -> None:
        gc.callbacks.remove(self._probe)

    def _probe(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.pauses.append(((time.perf_counter() - self._start) * 1000, in_turn()))

    def summary(self) -> dict[str, Any]:
        ms = [p for p, _ in self.pauses]
        return {"full_collections": len(ms), "in_turns": sum(1 for _, inside in self.pauses if inside),
                "max_ms": round(max(ms), 1) if ms else 0.0, "total_ms": round(sum(ms), 1)}


def run_bench(sessions: int, turns: int, seed: int, *, workdir: str | None = None,
              progress: Progress | None = None, keep: bool = False, metrics: bool = False,
              traces: bool = False, gc_mode: str = GC_BETWEEN_TURNS) -> dict[str, Any]:
    """`metrics`: the turns measured for a scrape (Turnlog.metrics() first, one scrape timed at the
    end); `traces`: every turn's spans recorded by the OpenTelemetry SDK (exported to nowhere);
    `gc_mode`: the engine's (EngineConfig.gc_mode); the workload's full collections are reported."""
    if sessions < 1 or turns < 1:
        raise ValueError("--sessions and --turns must be at least 1")
    home, db, rng, sources, order = prepare_workload(sessions, turns, seed, workdir)
    sent = 0

    def send(text: str) -> None:
        nonlocal sent
        sent += 1

    provider = _discarding_tracer_provider() if traces else None
    t = Turnlog(db, owner="bench", tracer_provider=provider, config=EngineConfig(gc_mode=gc_mode))
    registry = t.metrics() if metrics else None
    collections = FullCollections().__enter__()
    start, cpu_start = time.perf_counter(), time.process_time()
    latencies = run_turns(t, sources, order, rng, send, progress=progress)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    collections.__exit__()
    catch_up_t0 = time.perf_counter()
    t.maintenance.catch_up()
    catch_up_s = time.perf_counter() - catch_up_t0
    scrape_s = _timed_scrape(registry) if registry is not None else None
    if provider is not None:
        provider.shutdown()
    events = t.maintenance.log_head()
    t.close()
    bytes_after = dir_bytes(home)

    restart_t0 = time.perf_counter()
    t = Turnlog(db, owner="bench-restart")
    listed = t.sessions()
    loaded = sum(len(t.transcript(s.session_id)) for s in listed)
    restart_s = time.perf_counter() - restart_t0

    search = run_search_mix(t, seed=seed)
    fts_t0 = time.perf_counter()
    fts_report = t.maintenance.rebuild(["search"])
    fts_rebuild = {"seconds": round(time.perf_counter() - fts_t0, 4), "messages_indexed": loaded,
                   "events_read": fts_report["events"]}
    # Hermes' like-for-like operation: its rebuild_fts re-indexes rows it has, as this does.
    index_t0 = time.perf_counter()
    index_report = t.maintenance.rebuild_search_index()
    fts_index_rebuild = {"seconds": round(time.perf_counter() - index_t0, 4), "messages_indexed": index_report["messages"]}

    rebuild_t0 = time.perf_counter()
    rebuilt_events = int(t.maintenance.rebuild()["events"])
    rebuild_s = time.perf_counter() - rebuild_t0
    accept_ms = accept_latencies(t, sources, rng)
    t.close()

    lat_ms = [x * 1000 for x in latencies]
    result: dict[str, Any] = {
        "bench": "turnlog",
        "python": _platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "machine": {"cpus": os.cpu_count(), "platform": _platform.platform()},
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "params": {"sessions": sessions, "turns_per_session": turns, "seed": seed, "metrics": metrics,
                   "traces": traces, "gc_mode": gc_mode},
        "turns_done": len(order),
        "replies_sent": sent,
        "events": events,
        "workload_wall_s": round(wall, 3),
        "workload_cpu_s": round(cpu, 3),  # this process's CPU time in the turn loop: steadier than wall time under load
        "turns_per_s": round(len(order) / wall, 2),
        "turn_latency_ms": {"p50": round(percentile(lat_ms, 50), 3), "p90": round(percentile(lat_ms, 90), 3),
                            "p99": round(percentile(lat_ms, 99), 3), "max": round(max(lat_ms), 3),
                            "mean": round(statistics.fmean(lat_ms), 3)},
        "full_gc_in_workload": collections.summary(),
        "accept_latency_ms": {"p50": round(percentile(accept_ms, 50), 3), "p99": round(percentile(accept_ms, 99), 3),
                              "accepts": len(accept_ms)},
        "projection_catch_up_s": round(catch_up_s, 3),
        **({"metrics_scrape_ms": round(scrape_s * 1000, 3)} if scrape_s is not None else {}),
        "restart": {"load_s": round(restart_s, 4), "sessions_loaded": len(listed), "messages_loaded": loaded},
        "search": search,
        "fts_rebuild": fts_rebuild,
        "fts_index_rebuild": fts_index_rebuild,
        "projections_rebuild": {"seconds": round(rebuild_s, 3), "events": rebuilt_events,
                                "events_per_s": round(rebuilt_events / rebuild_s) if rebuild_s else None},
        "bytes_after_workload": bytes_after,
        "workdir": home,
    }
    if not keep and workdir is None:
        shutil.rmtree(home, ignore_errors=True)
        result["workdir"] += " (deleted)"
    return result


def _timed_scrape(registry: Any) -> float:
    from prometheus_client import generate_latest

    t0 = time.perf_counter()
    generate_latest(registry)
    return time.perf_counter() - t0


def _discarding_tracer_provider() -> Any:
    """An SDK provider that records every span and exports it, in batches, to nowhere: what a
    traced gateway pays in-process, without a collector's cost."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    except ImportError:
        raise ValueError("--traces needs the OpenTelemetry SDK: pip install opentelemetry-sdk") from None

    class Discard(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    return provider
