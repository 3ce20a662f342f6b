"""`turnlog bench --concurrency C`: the workload with C keys in flight, every turn done, each key's in order."""

from __future__ import annotations

import json

from harness.cli import ok, run
from turnlog import Turnlog


def test_the_concurrent_workload_runs_every_turn_and_keeps_each_keys_order(tmp_path):
    work = tmp_path / "work"
    result = json.loads(ok("bench", "-S", "12", "-T", "3", "-C", "5", "--workdir", str(work), "--json").stdout)
    assert (result["turns_done"], result["params"]["concurrency"]) == (36, 5)
    assert result["turns_per_s"] > 0 and result["turn_latency_ms"]["p99"] >= result["turn_latency_ms"]["p50"]
    # a turn on an idle key: its start and its answer, two store calls, and its send on the loop
    assert result["handoffs_per_turn"] == {"store_calls": 2.0, "loop_calls": 1.0}
    t = Turnlog(work / "bench.db")
    sessions = t.sessions()
    assert len(sessions) == 12
    for s in sessions:
        users = [m for m in t.turns.transcript(s.session_id) if m.role == "user"]
        assert len(users) == 3
        numbers = [int(m.content.split(":", 1)[0][1:]) for m in users]  # "Q<n>: ..." in workload order
        assert numbers == sorted(numbers)
    t.close()


def test_a_bad_concurrency_is_a_usage_error():
    result = run("bench", "-C", "-1")
    assert result.exit_code == 2 and "--concurrency" in result.output


def test_the_store_threads_are_chosen_and_reported():
    result = json.loads(ok("bench", "-S", "6", "-T", "2", "-C", "3", "--store-threads", "1", "--json").stdout)
    assert (result["turns_done"], result["params"]["store_threads"]) == (12, 1)
    default = json.loads(ok("bench", "-S", "4", "-T", "1", "-C", "2", "--json").stdout)
    assert default["params"]["store_threads"] == 4


def test_store_threads_without_concurrency_or_below_one_is_a_usage_error():
    alone = run("bench", "--store-threads", "2")
    assert alone.exit_code == 2 and "--concurrency" in alone.output
    zero = run("bench", "-C", "2", "--store-threads", "0")
    assert zero.exit_code == 2 and "--store-threads" in zero.output
