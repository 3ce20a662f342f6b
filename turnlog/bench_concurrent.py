"""`turnlog bench --concurrency C`: the standard workload with C keys in flight, through the
asyncio API, as a gateway serving many chats at once runs it.

The sessions are dealt into C lanes (session i to lane i mod C); each lane runs its sessions'
turns in the workload's order, one at a time, so each key's turns stay in order while C keys
are in flight. Agents await `asyncio.sleep(0)` and answer at once: what is measured is the
engine. A turn's latency is the wall time of its `handle_message` (the durable accept, the
routing, the lease, the reply with its obligation, the send and its settling), including any
wait for a store slot behind the other keys' turns. `handoffs_per_turn` counts the calls between
the event loop and the store threads a turn made (AsyncTurnlog.handoffs). `engine_ms` is the
engine's own time per turn (commands/store_threads.py engine_time): what its store calls ran,
without the waits for a store thread behind the other keys' turns. With C keys in flight the
wall time is at least C / (turns/s) on average (Little's law), whatever the engine costs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import statistics
import time
from typing import Any

from .aio import AsyncTurnlog, Handoffs, engine_time
from .api import Turnlog
from .bench import Progress, percentile, prepare_workload
from .workload import assistant_text, user_text

STORE_THREADS = 4


def run_concurrent_bench(sessions: int, turns: int, seed: int, concurrency: int, *, workdir: str | None = None,
                         progress: Progress | None = None, store_threads: int = STORE_THREADS) -> dict[str, Any]:
    if sessions < 1 or turns < 1 or concurrency < 1 or store_threads < 1:
        raise ValueError("--sessions, --turns, --concurrency and --store-threads must be at least 1")
    home, db, rng, sources, order = prepare_workload(sessions, turns, seed, workdir)
    work = []
    for n, index in enumerate(order):  # the texts drawn in the order the sequential run draws them
        reply = assistant_text(rng)
        work.append((n, index, user_text(rng, n), reply))
    lanes: list[list[tuple[int, int, str, str]]] = [[] for _ in range(min(concurrency, sessions))]
    for item in work:
        lanes[item[1] % len(lanes)].append(item)
    latencies: list[float] = []
    engine: list[float] = []
    done = [0]

    async def send(text: str) -> None:
        return None

    async def lane(t: AsyncTurnlog, items: list[tuple[int, int, str, str]]) -> None:
        for n, index, text, reply in items:
            source = dataclasses.replace(sources[index], message_id=f"m{n}")

            async def agent(history: Any, item: Any, reply: str = reply) -> str:
                await asyncio.sleep(0)
                return reply
            t0 = time.perf_counter()
            with engine_time() as spent:
                await t.handle_message(source, text, agent, send)
            latencies.append(time.perf_counter() - t0)
            engine.append(spent[0])
            done[0] += 1
            if progress is not None and done[0] % 100 == 0:
                progress(done[0], len(work))

    async def main() -> tuple[float, Handoffs]:
        t = AsyncTurnlog(Turnlog(db, owner="bench"), store_threads=store_threads, threads=max(8, concurrency))
        before = t.handoffs
        start = time.perf_counter()
        await asyncio.gather(*(lane(t, items) for items in lanes))
        wall = time.perf_counter() - start
        after = t.handoffs
        await t.close()
        return wall, Handoffs(after.store_calls - before.store_calls, after.loop_calls - before.loop_calls)

    wall, handoffs = asyncio.run(main())
    lat_ms = [x * 1000 for x in latencies]
    result: dict[str, Any] = {
        "bench": "turnlog-concurrent",
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count()},
        "params": {"sessions": sessions, "turns_per_session": turns, "seed": seed, "concurrency": len(lanes),
                   "store_threads": store_threads},
        "turns_done": len(latencies),
        "workload_wall_s": round(wall, 3),
        "turns_per_s": round(len(latencies) / wall, 2),
        # Calls between the loop and the store threads (a count: the same on any machine).
        "handoffs_per_turn": {"store_calls": round(handoffs.store_calls / len(latencies), 2),
                              "loop_calls": round(handoffs.loop_calls / len(latencies), 2)},
        "turn_latency_ms": _summary(lat_ms),
        "engine_ms": _summary([x * 1000 for x in engine]),
        "workdir": home,
    }
    if workdir is None:
        shutil.rmtree(home, ignore_errors=True)
        result["workdir"] += " (deleted)"
    return result


def _summary(ms: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(ms, 50), 3), "p90": round(percentile(ms, 90), 3),
            "p99": round(percentile(ms, 99), 3), "max": round(max(ms), 3), "mean": round(statistics.fmean(ms), 3)}
