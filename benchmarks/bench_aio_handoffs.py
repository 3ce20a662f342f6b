"""What one handoff between the event loop and a store thread of the asyncio API costs: a store
call's round trip (`await AsyncTurnlog.run(int)`) and a loop call's (a store thread awaiting a
no-op coroutine on the loop), wall and CPU time each, on an empty database. A turn on an idle key
makes two store calls and one loop call (`turnlog bench --concurrency` reports `handoffs_per_turn`).

    .venv/bin/python benchmarks/bench_aio_handoffs.py [--calls 6000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from typing import Callable

from turnlog import Turnlog
from turnlog.aio import AsyncTurnlog


async def timed(what: str, calls: int, run: Callable[[], object]) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    await run()  # type: ignore[misc]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{what}: {wall / calls * 1e6:.1f} µs wall, {cpu / calls * 1e6:.1f} µs CPU a round trip ({calls} calls)")


async def measure(t: Turnlog, calls: int) -> None:
    a = AsyncTurnlog(t)
    loop = asyncio.get_running_loop()

    async def store_calls() -> None:
        for _ in range(calls):
            await a.run(int)

    async def nothing() -> None:
        return None

    def loop_calls_from_a_store_thread() -> None:
        for _ in range(calls):
            a._wait(loop, nothing())  # noqa: SLF001 - the handoff itself is what is measured

    async def loop_calls() -> None:
        await a.run(loop_calls_from_a_store_thread)

    await timed("store call", calls, store_calls)
    await timed("loop call", calls, loop_calls)
    a.shutdown_threads()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=6000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home, Turnlog(os.path.join(home, "handoffs.db"), owner="bench") as t:
        asyncio.run(measure(t, args.calls))


if __name__ == "__main__":
    main()
