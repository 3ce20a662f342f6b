"""`turnlog show`, `ledger`, `queue` and `bench` at the command line."""

import json

from click.testing import CliRunner

from turnlog import ManualClock, SequentialIds, Turnlog
from turnlog.cli import main

from chat import alice, reply_with

KEY = "agent:main:telegram:dm:42"


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_show_ledger_and_queue(tmp_path):
    db = str(tmp_path / "c.db")
    with Turnlog(db, clock=ManualClock(), session_ids=SequentialIds()) as t:
        session_id = t.handle_message(alice("m1"), "hello", reply_with("hi alice"), lambda text: None)[0].session_id
        t.command(alice("m1"), "/queue later please")

    show = invoke("--db", db, "show", KEY, "--json")
    assert show.exit_code == 0, show.output
    data = json.loads(show.output)
    assert data["session_id"] == session_id and data["lease"] is None
    assert [(m["role"], m["content"], m["epoch"]) for m in data["messages"]] == [
        ("user", "hello", 1), ("assistant", "hi alice", 1)]
    assert "assistant  1      hi alice" in invoke("--db", db, "show", session_id).output

    ledger = json.loads(invoke("--db", db, "ledger", "--json").output)
    assert [(d["session_id"], d["seq"], d["state"], d["attempts"]) for d in ledger] == [(session_id, 2, "delivered", 1)]
    assert json.loads(invoke("--db", db, "ledger", "--status", "pending", "--json").output) == []
    assert invoke("--db", db, "ledger", "--status", "nope").exit_code == 2

    queue = invoke("--db", db, "queue", KEY)
    assert queue.exit_code == 0 and "later please" in queue.output and "depth: 1" in queue.output


def test_bench_prints_the_workload_fields(tmp_path):
    result = invoke("bench", "-S", "3", "-T", "2", "--seed", "1", "--workdir", str(tmp_path / "b"), "--json")

    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert figures["turns_done"] == 6 and figures["replies_sent"] == 6
    for field in ("turns_per_s", "turn_latency_ms", "restart", "search", "fts_rebuild", "fts_index_rebuild",
                  "bytes_after_workload"):
        assert figures[field] is not None, field
    assert set(figures["turn_latency_ms"]) >= {"p50", "p99"}
    assert figures["accept_latency_ms"]["accepts"] == 500 and figures["accept_latency_ms"]["p99"] > 0
    assert invoke("bench", "-S", "0").exit_code == 2
