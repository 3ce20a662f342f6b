"""The engine's own time of a turn through the asyncio API (commands/store_threads.py engine_time,
reported by `turnlog bench --concurrency` as `engine_ms`): what its store calls ran, without the
time its send kept the store thread waiting for the loop."""

from __future__ import annotations

import asyncio
import time

from grouping import source
from turnlog.aio import AsyncTurnlog, engine_time

SEND_S = 0.2  # the platform's time: a send that takes this long on the loop


def test_a_turns_engine_time_leaves_out_the_wait_for_its_send_on_the_loop(make_turnlog):
    t = make_turnlog()
    at = AsyncTurnlog(t)
    sent: list[str] = []

    async def agent(history, item):
        return f"re: {item.text}"

    async def send(text: str) -> None:
        await asyncio.sleep(SEND_S)
        sent.append(text)

    async def main() -> tuple[float, float]:
        began = time.perf_counter()
        with engine_time() as spent:
            await at.handle_message(source(0), "hello", agent, send)
        return spent[0], time.perf_counter() - began

    spent, wall = asyncio.run(main())
    t.close()
    assert sent == ["re: hello"]
    # The send's wait happened inside the answering store call: counted, the engine time would
    # be at least SEND_S. (Not `spent <= wall - SEND_S`: the store thread starts its wait clock a
    # moment after the loop starts the send, and under load that moment is a millisecond or more.)
    assert wall >= SEND_S
    assert 0 < spent < SEND_S, (spent, wall)
