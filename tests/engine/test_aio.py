"""The asyncio API (issue 12, item 3): 200 keys at once, agents awaiting asyncio.sleep, the event
loop is never held up by the turns' writes (no store call on its thread, and a bounded amount of its
own work between two ticks of a ticker task); each key's turns in order."""

from __future__ import annotations

import asyncio
import random
import threading
import time

from turnlog import EngineConfig, SessionSource, Turnlog, TurnCancelled, current_turn
from turnlog.aio import AsyncTurnlog, handle_message

KEYS = 200
PER_KEY = 3
CONCURRENT = KEYS * 3 // 4  # agents that must be thinking at once: the keys really run concurrently
WAIT_TOGETHER_S = 60.0  # how long the first agents wait for the others before the test gives up on them
# The most the loop thread may compute between two ticks. Measured in that thread's CPU time, not
# wall time: a process starved by other processes (two busy cores) sees every tick late, up to 1.6 s
# here, whatever its loop does, and the store I/O that would block it is caught by the spy below.
# The loop's busiest moment is 200 users starting at once: about 15 ms of CPU on a quiet machine,
# 66 ms with both cores busy (GIL hand-offs cost CPU too), so the bound is five times the old 50 ms.
LOOP_WORK_BOUND_S = 0.250


def source(key: int, n: int) -> SessionSource:
    return SessionSource(platform="discord", chat_type="dm", chat_id=f"c{key}", user_id=f"u{key}",
                         message_id=f"k{key}-m{n}")


async def ticker(stop: asyncio.Event, lags: list[float], work: list[float], period: float = 0.005) -> None:
    """Per tick: how late it came (wall time) and how long the loop thread ran other work meanwhile."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before, cpu = loop.time(), time.thread_time()
        await asyncio.sleep(period)
        lags.append(loop.time() - before - period)
        work.append(time.thread_time() - cpu)


def _store_calls_on(t: Turnlog, threads: list[str]) -> None:
    """Record the thread of every call into the store's recorder (where SQLite I/O happens)."""
    recorder = t._app.recorder
    for name in dir(recorder):
        method = getattr(recorder, name)
        if name.startswith("_") or not callable(method):
            continue

        def spy(*args, __method=method, **kwargs):
            on_loop = asyncio._get_running_loop() is not None  # called from a coroutine or a loop callback
            threads.append("the loop" if on_loop else threading.current_thread().name)
            return __method(*args, **kwargs)
        setattr(recorder, name, spy)


def _run_200_keys(db: str) -> tuple[float, float, float, list[str]]:
    t = Turnlog(db)
    store_threads: list[str] = []
    _store_calls_on(t, store_threads)
    at = AsyncTurnlog(t)
    rng = random.Random(7)
    sent: dict[str, list[str]] = {}
    agents_running = 0
    most_running = 0
    together = asyncio.Event()  # set once CONCURRENT agents think at once
    deadline = time.monotonic() + WAIT_TOGETHER_S

    async def agent(history, item):
        nonlocal agents_running, most_running
        agents_running += 1
        most_running = max(most_running, agents_running)
        if agents_running >= CONCURRENT:
            together.set()
        if not together.is_set():  # wait for the others (not for a time: a starved machine starts them late)
            try:
                await asyncio.wait_for(together.wait(), max(deadline - time.monotonic(), 0))
            except asyncio.TimeoutError:  # they never came: most_running tells
                pass
        await asyncio.sleep(rng.uniform(0, 0.01))  # the keys' later turns interleave
        agents_running -= 1
        return f"re:{item.text}"

    def send_for(key: int):
        async def send(text: str) -> None:
            await asyncio.sleep(0.001)
            sent.setdefault(f"c{key}", []).append(text)
        return send

    async def user(key: int) -> None:
        for n in range(PER_KEY):  # a user who waits for each answer
            await at.handle_message(source(key, n), f"k{key} m{n}", agent, send_for(key))

    async def main() -> tuple[list[float], list[float], float]:
        await at.start_gateway("aio")
        stop, lags, work = asyncio.Event(), [], []
        tick = asyncio.create_task(ticker(stop, lags, work))
        began = time.monotonic()
        await asyncio.gather(*(user(k) for k in range(KEYS)))
        elapsed = time.monotonic() - began
        stop.set()
        await tick
        await at.stop_gateway()
        return lags, work, elapsed

    try:
        lags, work, elapsed = asyncio.run(main())
        # every key answered in order, exactly once each
        assert sent == {f"c{k}": [f"re:k{k} m{n}" for n in range(PER_KEY)] for k in range(KEYS)}
        assert most_running >= CONCURRENT  # the keys really ran concurrently
        ledger = t.ledger()
        assert len(ledger) == KEYS * PER_KEY and {r.state for r in ledger} == {"delivered"}
    finally:
        t.close()
    return max(work), max(lags), elapsed, store_threads


def test_200_keys_concurrently_without_blocking_the_loop(tmp_path):
    """The loop thread never touches the store, and never computes for long between two ticks."""
    work, lag, elapsed, store_threads = _run_200_keys(str(tmp_path / "t.db"))
    print(f"\n{KEYS} keys x {PER_KEY} turns in {elapsed:.1f}s; between two ticks the loop worked at most"
          f" {work * 1000:.1f} ms (wall-clock lag at most {lag * 1000:.1f} ms)")
    assert store_threads and "the loop" not in store_threads, "the event loop's thread did store I/O"
    assert work < LOOP_WORK_BOUND_S, f"the event loop worked {work * 1000:.0f} ms between two ticks"


def test_one_key_runs_its_turns_one_at_a_time_in_arrival_order(tmp_path):
    t = Turnlog(str(tmp_path / "t.db"))
    order: list[str] = []
    running = 0

    async def agent(history, item):
        nonlocal running
        running += 1
        assert running == 1
        first_running.set()
        if item.text == "m0":  # still running when the burst has arrived, however slow the machine
            await burst_accepted(4)
        running -= 1
        order.append(item.text)
        return "ok"

    async def burst_accepted(count: int) -> None:
        deadline = time.monotonic() + 120
        while not any(row.state == "pending" and len(row.message_ids) == count
                      for row in await asyncio.to_thread(t.queue, source(1, 0))):
            assert time.monotonic() < deadline, "the burst was never accepted"
            await asyncio.sleep(0.01)

    first_running = asyncio.Event()

    async def main() -> None:
        async def noop(text):
            return None
        first = asyncio.create_task(handle_message(t, source(1, 0), "m0", agent, noop))
        await first_running.wait()
        # four more messages arrive while the first turn runs: accepted in arrival order, the burst
        # merges into one pending item (the queue rule), answered by the second turn
        await asyncio.gather(first, *(handle_message(t, source(1, n), f"m{n}", agent, noop) for n in range(1, 5)))

    try:
        asyncio.run(main())
        assert order == ["m0", "m1\nm2\nm3\nm4"]
    finally:
        t.close()


def test_a_cancelled_turn_cancels_the_agent_task(tmp_path):
    # The keeper renews every TTL/3 (1 s), so the refusal comes within a second of the /stop; a TTL
    # of 0.3 s let a keeper starved of CPU for 0.2 s lose the lease before the /stop could revoke it.
    config = EngineConfig(lease_ttl_s=3.0)
    t = Turnlog(str(tmp_path / "t.db"), config=config)
    other = Turnlog(str(tmp_path / "t.db"), config=config)
    got: dict[str, object] = {}

    async def agent(history, item):
        got["turn"] = current_turn()  # None on the loop: the cancel reaches the task instead
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            got["cancelled"] = True
            raise
        return "never"

    async def main() -> None:
        async def noop(text):
            return None
        task = asyncio.create_task(handle_message(t, source(1, 0), "long", agent, noop))
        while "turn" not in got:
            await asyncio.sleep(0.01)
        await asyncio.to_thread(other.command, source(1, 1), "/stop")
        try:
            await asyncio.wait_for(task, 30)
        except TurnCancelled as e:
            got["error"] = e

    try:
        asyncio.run(main())
        assert got.get("cancelled") is True and isinstance(got.get("error"), TurnCancelled)
    finally:
        t.close()
        other.close()
