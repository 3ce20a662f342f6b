"""Acceptance: the agent cache (seed 002 §11) — LRU, idle and memory-pressure eviction, never an
agent mid-turn nor a recent one, agents rebuilt when another process moved the session on, and
evicted by the session operations of the Turnlog it is attached to; every hit, miss and eviction counted."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import weakref

import pytest

from turnlog import AgentCache, CacheStats, InvalidRequest
from turnlog import memory

from chat import alice, collect, echo

MiB = 1024 * 1024


class Agent:
    """A warm agent: the session it serves, and a buffer standing for its pinned transcript."""

    def __init__(self, session_id: str, mb: int = 0) -> None:
        self.session_id = session_id
        self.buffer = bytearray(mb * MiB)


class Built:
    """A factory that remembers what it built and keeps only weak references to the agents."""

    def __init__(self, mb: int = 0) -> None:
        self.mb = mb
        self.calls: list[str] = []
        self.live: weakref.WeakSet[Agent] = weakref.WeakSet()

    def __call__(self, session_id: str) -> Agent:
        self.calls.append(session_id)
        agent = Agent(session_id, self.mb)
        self.live.add(agent)
        return agent

    def held_bytes(self) -> int:
        return sum(len(a.buffer) for a in list(self.live))


def evicted_into(log: list[tuple[str, str]]):
    return lambda session_id, agent, reason: log.append((session_id, reason))


def warm(cache: AgentCache, *session_ids: str) -> None:
    for session_id in session_ids:
        cache.get(session_id)


# -- LRU and idle ----------------------------------------------------------------------------

def test_a_full_cache_evicts_the_least_recently_used_agent(clock):
    built, gone = Built(), []
    cache = AgentCache(built, max_size=2, memory_high_mb="off", clock=clock, on_evict=evicted_into(gone))
    warm(cache, "s1", "s2", "s1", "s3")  # s1 used again: s2 is the least recently used
    assert gone == [("s2", "lru")]
    assert "s1" in cache and "s3" in cache and len(cache) == 2
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.evictions["lru"], stats.size) == (1, 3, 1, 2)


def test_an_agent_in_a_turn_is_never_the_one_a_full_cache_evicts(clock):
    gone = []
    cache = AgentCache(Built(), max_size=1, memory_high_mb="off", clock=clock, on_evict=evicted_into(gone))
    with cache.checkout("s1"):
        warm(cache, "s2")  # over capacity, and s1 is busy: s2 (just built, not checked out) goes
        assert "s1" in cache
    assert gone == [("s2", "lru")]


def test_the_idle_sweep_evicts_agents_idle_for_the_ttl_by_the_injected_clock(clock):
    gone = []
    cache = AgentCache(Built(), idle_ttl_s=3600, memory_high_mb="off", clock=clock, on_evict=evicted_into(gone))
    warm(cache, "old")
    clock.advance(1800)
    warm(cache, "new")
    clock.advance(1799)
    assert cache.sweep_idle() == 0
    clock.advance(1)
    assert cache.sweep_idle() == 1
    assert gone == [("old", "idle")] and "new" in cache
    with cache.checkout("new"):
        clock.advance(7200)
        assert cache.sweep_idle() == 0  # mid-turn: kept however long the turn takes
    assert cache.stats().evictions["idle"] == 1


# -- memory pressure ---------------------------------------------------------------------------

def test_memory_pressure_evicts_least_recent_agents_until_under_budget_keeping_busy_and_recent(clock):
    built, gone = Built(mb=4), []
    cache = AgentCache(built, memory_high_mb=17, protect_recent=2, clock=clock, on_evict=evicted_into(gone),
                       anon_memory=built.held_bytes)
    with cache.checkout("busy"):  # the least recently used, but mid-turn
        warm(cache, "a", "b", "c", "d", "e")  # 24 MiB held
        assert cache.sweep_memory() == 2
    assert gone == [("a", "memory"), ("b", "memory")]  # 24 -> 20 -> 16 MiB <= 17: c stays
    assert built.held_bytes() == 16 * MiB
    assert {"busy", "c", "d", "e"} == {s for s in ("busy", "a", "b", "c", "d", "e") if s in cache}
    assert cache.stats().evictions["memory"] == 2


def test_memory_pressure_stops_when_only_busy_and_recent_agents_are_left(clock):
    built = Built(mb=4)
    cache = AgentCache(built, memory_high_mb=1, protect_recent=2, clock=clock, anon_memory=built.held_bytes)
    with cache.checkout("busy"):
        warm(cache, "a", "b", "c")
        assert cache.sweep_memory() == 1  # only a: b and c are the two most recent
    assert built.held_bytes() == 12 * MiB


def test_memory_pressure_with_the_real_process_reader_gives_the_memory_back(clock):
    memory.give_back_memory()  # freed pages left resident by earlier tests would be reused, not added
    baseline = memory.process_anon_bytes()
    assert baseline is not None
    built, gone = Built(mb=8), []
    cache = AgentCache(built, memory_high_mb=baseline / MiB + 40, protect_recent=2, clock=clock,
                       on_evict=evicted_into(gone), anon_memory=memory.process_anon_bytes)
    with cache.checkout("busy"):
        warm(cache, *[f"s{i}" for i in range(8)])  # 72 MiB of buffers over a 40 MiB margin
        assert memory.process_anon_bytes() > cache.memory_budget_bytes
        evicted = cache.sweep_memory()
    assert evicted >= 3 and all(reason == "memory" for _, reason in gone)
    assert memory.process_anon_bytes() <= cache.memory_budget_bytes
    assert {"busy", "s6", "s7"} <= {s for s in ["busy", *[f"s{i}" for i in range(8)]] if s in cache}


def test_the_memory_budget_setting():
    assert AgentCache(Built(), memory_high_mb=512).memory_budget_bytes == 512 * MiB
    assert AgentCache(Built(), memory_high_mb="off").memory_budget_bytes is None
    assert AgentCache(Built(), memory_high_mb=0).memory_budget_bytes is None
    assert AgentCache(Built(), memory_high_mb="auto").memory_budget_bytes == memory.auto_budget()
    with pytest.raises(InvalidRequest, match="memory_high_mb"):
        AgentCache(Built(), memory_high_mb="lots")


def test_no_budget_means_no_memory_sweep(clock):
    built = Built(mb=1)
    cache = AgentCache(built, memory_high_mb="off", clock=clock, anon_memory=lambda: 1 << 50)
    warm(cache, "a", "b")
    assert cache.sweep_memory() == 0 and len(cache) == 2


# -- staleness and session operations --------------------------------------------------------

def other_gateway_says(db: str, text: str) -> None:
    """Another gateway process, on the same SQLite file, answers a message of Alice's."""
    script = textwrap.dedent(f"""
        import turnlog
        source = turnlog.SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42")
        with turnlog.open({db!r}, owner="gateway-b") as t:
            t.handle_message(source, {text!r}, lambda history, item: "from b", lambda *a: None)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)


def step(t, cache, text):
    """The gateway step: the session's agent checked out around handle_message."""
    session_id = t.get_or_create_session(alice()).session_id
    with cache.checkout(session_id) as agent:
        t.handle_message(alice(), text, lambda history, item: f"{agent.session_id}: {item.text}", collect([]))
    return session_id


def test_a_write_by_another_process_makes_the_next_checkout_rebuild_the_agent(t, db, clock):
    built, gone = Built(), []
    cache = AgentCache(built, memory_high_mb="off", clock=clock, on_evict=evicted_into(gone))
    cache.attach(t)
    session_id = step(t, cache, "one")
    step(t, cache, "two")
    assert built.calls == [session_id]  # its own turns kept it fresh
    version = t.session_version(session_id)

    other_gateway_says(db, "three, through gateway b")

    assert t.session_version(session_id) > version
    step(t, cache, "four")
    assert built.calls == [session_id, session_id]
    assert gone == [(session_id, "stale")]
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.misses_by_reason, stats.evictions["stale"]) == (
        1, 2, {"absent": 1, "stale": 1}, 1)


def test_session_version_moves_with_the_history_not_with_activity(t):
    session_id = t.get_or_create_session(alice()).session_id
    assert t.session_version(session_id) == 0
    t.handle_message(alice(), "hello", echo, collect([]))
    after_turn = t.session_version(session_id)
    assert after_turn == 2
    t.get_or_create_session(alice())  # activity only
    assert t.session_version(session_id) == after_turn


def undo_last_turn(t, session_id):
    """An operator's /undo of the last turn (a TurnsUndone on the session)."""
    assert t.undo(session_id, 1, actor="operator", cause="/undo").turns == 1


def test_a_history_edit_elsewhere_moves_the_version_and_makes_the_agent_stale(t, other, clock):
    built, gone = Built(), []
    cache = AgentCache(built, memory_high_mb="off", clock=clock, on_evict=evicted_into(gone))
    cache.attach(t)
    session_id = step(t, cache, "one")
    version = t.session_version(session_id)
    told = []
    other.on_session_change(lambda sid, reason: told.append((sid, reason)))

    undo_last_turn(other, session_id)

    assert told == [(session_id, "undone")]  # the editing engine's listeners hear of it at once
    assert t.session_version(session_id) == version + 1
    with cache.checkout(session_id):
        pass
    assert gone == [(session_id, "stale")] and len(built.calls) == 2


def test_new_and_reset_evict_the_sessions_agent_through_the_attached_turnlog(t, clock):
    gone = []
    cache = AgentCache(Built(), memory_high_mb="off", clock=clock, on_evict=evicted_into(gone))
    cache.attach(t)
    first = step(t, cache, "hello")
    t.command(alice(), "/new")
    assert gone == [(first, "invalidated")] and first not in cache
    second = step(t, cache, "again")
    with cache.checkout(second):
        t.command(alice(), "/reset")
        assert second in cache  # mid-turn: it goes when the checkout ends
    assert gone[-1] == (second, "invalidated") and second not in cache
    assert cache.stats().evictions["invalidated"] == 2


def test_a_rotation_and_a_suspension_tell_the_listeners(t):
    told = []
    stop = t.on_session_change(lambda session_id, reason: told.append((session_id, reason)))
    session_id = t.get_or_create_session(alice()).session_id
    token = t.turns.acquire_lease(session_id, t.routing_key(alice()))
    child = t.turns.rotate_session(token, alice())
    t.turns.release_lease(child)
    t.suspend(child.session_id)
    assert told == [(session_id, "compression"), (child.session_id, "suspended")]
    stop()
    t.command(alice(), "/new")
    assert len(told) == 2


def test_a_failing_listener_or_eviction_hook_does_not_break_the_command(t, clock):
    def boom(*args):
        raise RuntimeError("hook failed")
    cache = AgentCache(Built(), memory_high_mb="off", clock=clock, on_evict=boom)
    cache.attach(t)
    t.on_session_change(boom)
    step(t, cache, "hello")
    assert t.command(alice(), "/new").changed
    assert cache.stats().evictions["invalidated"] == 1


def test_a_detached_cache_hears_nothing(t, clock):
    cache = AgentCache(Built(), memory_high_mb="off", clock=clock)
    cache.attach(t)
    session_id = step(t, cache, "hello")
    cache.detach()
    t.command(alice(), "/new")
    assert session_id in cache


def test_a_factory_that_fails_leaves_nothing_cached(clock):
    def failing(session_id):
        raise RuntimeError("no model")
    cache = AgentCache(failing, memory_high_mb="off", clock=clock)
    with pytest.raises(RuntimeError):
        cache.get("s1")
    assert "s1" not in cache and cache.stats().misses == 0


def test_stats_are_a_typed_snapshot(clock):
    cache = AgentCache(Built(), memory_high_mb=64, clock=clock)
    with cache.checkout("s1"):
        stats = cache.stats()
    assert isinstance(stats, CacheStats)
    assert stats.to_dict() == {
        "hits": 0, "misses": 1, "misses_by_reason": {"absent": 1, "stale": 0},
        "evictions": {"lru": 0, "idle": 0, "memory": 0, "stale": 0, "invalidated": 0},
        "size": 1, "in_use": 1, "memory_budget_bytes": 64 * MiB, "memory_trims": 0}
    cache.clear()
    assert len(cache) == 0 and cache.stats().evictions["invalidated"] == 1


def test_a_version_that_cannot_be_read_at_the_end_of_a_turn_drops_the_agent(clock):
    versions = iter([1])

    def version(session_id):
        return next(versions)  # the second read (when the checkout ends) fails
    gone = []
    cache = AgentCache(Built(), memory_high_mb="off", clock=clock, version=version, on_evict=evicted_into(gone))
    with cache.checkout("s1"):
        pass
    assert gone == [("s1", "invalidated")] and "s1" not in cache


def test_a_second_thread_waits_for_the_sessions_agent_until_the_first_checkout_ends(clock):
    import threading
    cache = AgentCache(Built(), memory_high_mb="off", clock=clock)
    entered, order = threading.Event(), []

    def second():
        with cache.checkout("s1") as agent:
            order.append(("second", agent))
            entered.set()

    with cache.checkout("s1") as first:
        other = threading.Thread(target=second)
        other.start()
        # A negative check, so it waits a bounded moment: the second checkout must not get in now.
        assert not entered.wait(0.2)
        order.append(("first", first))
    other.join(10)
    assert [who for who, _ in order] == ["first", "second"]
    assert order[0][1] is order[1][1]  # the same warm agent, one turn after the other
