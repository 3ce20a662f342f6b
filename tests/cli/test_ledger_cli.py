"""Dead letters through the CLI: `turnlog ledger retry ID|--dead` and `turnlog ledger abandon ID --reason`,
each an event with actor and cause, visible in `history`, `status` and the viewer."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from starlette.testclient import TestClient

from harness.cli import ok, run
from turnlog import ManualClock, SessionSource, Turnlog
from turnlog.web.app import create_app

from chat import reply_with

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def refuse(text):
    raise ConnectionRefusedError("platform down")


def dead_rows(db, n: int) -> list[str]:
    """n replies whose three sends all failed: dead-lettered."""
    t = Turnlog(db, clock=ManualClock(T0))
    ids = []
    for i in range(n):
        src = SessionSource(platform="telegram", chat_type="dm", chat_id=str(i), user_id=str(i), message_id=f"m{i}")
        [outcome] = t.handle_message(src, "hi", reply_with(f"answer {i}"), refuse)
        [row] = [r for r in t.ledger() if r.session_id == outcome.session_id]
        for _ in range(2):
            t.turns.deliver(__import__("uuid").UUID(row.delivery_id), refuse)
        ids.append(row.delivery_id)
    t.close()
    return ids


def ledger_json(db, *args) -> list[dict]:
    return json.loads(ok("--db", str(db), "ledger", *args, "--json").stdout)


def test_a_dead_row_is_retried_then_sent_by_the_sweep(tmp_path):
    db = tmp_path / "t.db"
    [one] = dead_rows(db, 1)
    assert [(r["delivery_id"], r["state"]) for r in ledger_json(db, "--status", "dead")] == [(one, "dead")]
    status = json.loads(ok("--db", str(db), "status", "--json").stdout)
    assert [r["delivery_id"] for r in status["dead_deliveries"]] == [one]

    [retried] = json.loads(ok("--db", str(db), "ledger", "retry", one, "--reason", "platform back", "--json").stdout)
    assert (retried["delivery_id"], retried["state"]) == (one, "failed")
    history = json.loads(ok("--db", str(db), "history", "--json", "--limit", "1000",
                            ledger_json(db)[0]["session_id"]).stdout)
    [event] = [e for e in history if e["event"] == "DeliveryRetried"]
    assert (event["actor"], event["cause"]) == ("cli", "cli:platform back")

    t = Turnlog(db, clock=ManualClock(T0))
    t.start_gateway("main")
    sent = []
    assert len(t.sweep_deliveries(lambda target, text: sent.append(text)).delivered) == 1
    assert sent[0].endswith("answer 0") and sent[0].startswith("♻️ Recovered reply")


def test_retry_dead_retries_every_dead_row_and_abandon_gives_one_up_for_good(tmp_path):
    db = tmp_path / "t.db"
    first, second = dead_rows(db, 2)
    retried = json.loads(ok("--db", str(db), "ledger", "retry", "--dead", "--attempts", "1", "--json").stdout)
    assert sorted(r["delivery_id"] for r in retried) == sorted([first, second])
    assert {r["state"] for r in retried} == {"failed"}

    [gone] = json.loads(ok("--db", str(db), "ledger", "abandon", first, "--reason", "user left", "--json").stdout)
    assert gone["state"] == "abandoned"
    again = run("--db", str(db), "ledger", "abandon", first, "--reason", "twice")
    assert again.exit_code == 2 and "already abandoned" in again.output and "Traceback" not in again.output

    with TestClient(create_app(str(db)), base_url="http://127.0.0.1") as c:
        page = c.get("/").text
    assert "Dead replies" in page


def test_bad_ledger_commands_are_one_line_usage_errors(tmp_path):
    db = tmp_path / "t.db"
    dead_rows(db, 1)
    for args, needle in ((["retry"], "one DELIVERY_ID or --dead"),
                         (["retry", "not-a-uuid"], "not a delivery id"),
                         (["abandon", "not-a-uuid", "--reason", "x"], "not a delivery id"),
                         (["retry", "--attempts", "0", "--dead"], "--attempts"),
                         # past what an event holds: refused, never 'TypeError: Integer exceeds 64-bit range'
                         (["retry", "--attempts", str(2**70), "--dead"], "attempts must be")):
        result = run("--db", str(db), "ledger", *args)
        assert result.exit_code == 2, (args, result.output)
        assert needle in result.output and "Traceback" not in result.output
    unknown = run("--db", str(db), "ledger", "abandon", "00000000-0000-0000-0000-000000000000", "--reason", "x")
    assert unknown.exit_code == 1 and "no delivery" in unknown.output
