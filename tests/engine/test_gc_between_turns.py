"""EngineConfig.gc_mode: with "between_turns" no full (generation-2) collection runs inside a
turn; the full collections run between turns. Thresholds are lowered so that the turns' own
allocations (reference cycles made by the agent, while the lease is held) set many off."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from turnlog import EngineConfig, gc_turns
from turnlog.aio import AsyncTurnlog
from turnlog.gc_turns import collections_between_turns, in_turn

from tests.chat import BOB, alice, collect

TURNS = 30


@pytest.fixture
def full_collections() -> Iterator[list[tuple[bool, bool]]]:
    """(inside the agent, the engine says a turn is running) for each full collection."""
    seen: list[tuple[bool, bool]] = []

    def probe(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            seen.append((agent_running[0], in_turn()))

    # What the process holds now is frozen (as the engine does once): the old generation is then
    # small enough for the turns' survivors to make a full collection due within a few turns.
    gc.collect()
    gc.freeze()
    saved = gc.get_threshold()
    gc.set_threshold(100, 2, 2)
    gc.callbacks.append(probe)
    try:
        yield seen
    finally:
        gc.callbacks.remove(probe)
        gc.set_threshold(*saved)


agent_running = [False]
kept: list[Any] = []  # what the turns leave alive: it grows the old generation until a full collection is due


def cycles_agent(history: Any, item: Any) -> str:
    """Makes reference cycles and long-lived objects while its turn holds the lease, as agents do."""
    agent_running[0] = True
    try:
        for _ in range(10_000):
            node: list[Any] = []
            node.append(node)
            kept.append([])
        return "ok"
    finally:
        agent_running[0] = False


def run_turns(t: Any) -> None:
    sent: list[str] = []
    for n in range(TURNS):
        t.handle_message(alice(f"m{n}"), f"hello {n}", cycles_agent, collect(sent))
    kept.clear()
    assert len(sent) == TURNS


def test_no_full_collection_runs_inside_a_turn(make_turnlog, full_collections):
    t = make_turnlog(config=EngineConfig(gc_mode="between_turns"))
    before = collections_between_turns()
    run_turns(t)
    assert not any(inside or running for inside, running in full_collections), full_collections
    assert full_collections, "the thresholds set no full collection off"
    assert collections_between_turns() > before  # they ran between the turns instead


def test_the_interpreters_own_full_collections_run_inside_turns(tmp_path):
    """The probe sees full collections inside turns when the engine leaves the collector alone:
    run in a fresh process, where no other test's engine has a say in the collector."""
    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from tests.engine import test_gc_between_turns as here
from turnlog import EngineConfig, Turnlog
fixture = here.full_collections.__wrapped__()
seen = next(fixture)
with Turnlog({str(tmp_path / "t.db")!r}, config=EngineConfig(gc_mode="default")) as t:
    here.run_turns(t)
print(sum(1 for inside, running in seen if inside and running))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) > 0


def test_gc_mode_is_checked():
    with pytest.raises(ValueError, match="gc_mode"):
        EngineConfig(gc_mode="sometimes")


def test_the_thresholds_are_given_back_between_turns(make_turnlog):
    saved = gc.get_threshold()
    t = make_turnlog(config=EngineConfig(gc_mode="between_turns"))
    run_turns(t)
    assert gc.get_threshold() == saved and not in_turn()


def test_a_collection_long_overdue_runs_inside_the_running_turns_and_stalls_no_new_one(make_turnlog):
    """With keys always in flight (the asyncio API) no moment is free of turns: a full collection
    overdue ten times over runs as the next turn begins, and that turn goes on at once. Before, it
    waited up to a second for the running turns to end, holding the one store slot they needed to."""
    t = make_turnlog(config=EngineConfig(gc_mode="between_turns"))
    sent: list[str] = []
    started_in_turn: list[bool] = []

    def probe(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            started_in_turn.append(in_turn())

    async def send(text: str) -> None:
        sent.append(text)

    async def main() -> None:
        a = AsyncTurnlog(t, store_threads=1, threads=4)
        thinking, answer = asyncio.Event(), asyncio.Event()

        async def slow(history: Any, item: Any) -> str:
            thinking.set()
            await answer.wait()
            return "first"

        async def quick(history: Any, item: Any) -> str:
            return "second"
        first = asyncio.ensure_future(a.handle_message(alice("a1"), "one", slow, send))
        await thinking.wait()  # a turn is running: no full collection can run between turns now
        for _ in range(gc_turns._OVERDUE * gc_turns._FULL_AFTER + 1):
            gc.collect(1)  # each counts towards the next full one: it is overdue ten times over
        gc.callbacks.append(probe)
        try:
            await asyncio.wait_for(a.handle_message(BOB, "two", quick, send), timeout=60)
        finally:
            gc.callbacks.remove(probe)
        assert sent == ["second"] and not first.done()  # it did not wait for the running turn
        answer.set()
        await asyncio.wait_for(first, timeout=60)
        a.shutdown_threads()

    asyncio.run(main())
    assert sorted(sent) == ["first", "second"]
    assert True in started_in_turn, started_in_turn  # the overdue collection ran, inside the first turn
