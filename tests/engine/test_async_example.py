"""examples/async_gateway.py (issue 12, item 7), run as a user would run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from turnlog import Turnlog

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "async_gateway.py"


def test_the_async_gateway_example_answers_every_message_with_a_tool_call(tmp_path):
    db = str(tmp_path / "gateway.db")
    done = subprocess.run([sys.executable, str(EXAMPLE), "--db", db, "--messages", "8", "--seed", "3"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    summary = dict(part.split("=") for part in done.stdout.strip().splitlines()[-1].split())
    assert summary["messages"] == "8" and summary["keys"] == "4"
    assert summary["replies"] == summary["tool_calls"] and int(summary["replies"]) >= 4
    posted = [line for line in done.stdout.splitlines() if " -> " in line]
    assert len(posted) == int(summary["replies"])
    assert {line.split("]")[0] for line in posted} == {"[telegram", "[discord"}

    with Turnlog(db) as t:
        ledger = t.ledger()
        assert len(ledger) == int(summary["replies"]) and {r.state for r in ledger} == {"delivered"}
        answered = 0
        for s in t.sessions():
            messages = t.transcript(s.session_id)
            turns = [messages[i:i + 4] for i in range(0, len(messages), 4)]
            for turn in turns:  # user, assistant calling the tool, the tool's result, the answer
                assert [m["role"] for m in turn] == ["user", "assistant", "tool", "assistant"]
                assert turn[1]["tool_calls"][0]["id"] == turn[2]["tool_call_id"]
                assert len({m["turn_id"] for m in turn}) == 1
            answered += sum(turn[0]["content"].count("message ") for turn in turns)
            assert t.queue(s.session_key) == []
        assert answered == 8  # every message answered, bursts merged by the queue rule
        assert len(t.usage(t.sessions()[0].session_id)) >= 1
        assert t.status("async-example").last_boot.state == "stopped"
