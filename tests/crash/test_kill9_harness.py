"""The kill -9 harness: child gateways SIGKILLed at random points, then the invariants (tests/harness).

50 rounds: each round is a child gateway process (every third round two live gateways of two names) (start_gateway -> sweep_deliveries ->
resume_interrupted -> pending_inbound -> the next chunk of scripted traffic) that the parent kills
after a random delay unless it drained and exited first. A final clean run settles what is left and
the checker judges the log and the adapter's send file. The checker's own tests below show that
each kind of violation is caught.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from harness.adapter import FakeAdapter
from harness.checker import PREFIX, Checker
from harness.runner import main as harness_main
from harness.runner import run_harness
from turnlog import ManualClock, Turnlog

from chat import alice

pytestmark = pytest.mark.takes_seconds(75)

ROUNDS = 50


def test_fifty_rounds_of_kill_9_break_no_invariant(tmp_path, capsys):
    result = run_harness(ROUNDS, seed=7, workdir=tmp_path)
    with capsys.disabled():
        print(f"\n{result.summary()}\n{result.details()}")
    assert result.violations == [], "\n".join(result.violations[:20])
    stats = result.report.stats
    # The run exercised what it claims to: boots, kills, crashes mid-turn, resumes, stuck loops.
    # (Loose floors: how much a child gets done before its kill depends on the machine's load.)
    assert stats["boots"] >= ROUNDS // 2 and result.kills >= ROUNDS // 5 and stats["unclean_boots"] >= ROUNDS // 5
    assert stats["interrupted_turns"] >= 3 and stats["resumed_turns"] >= 1
    assert stats["stuck_loop_suspensions"] >= 1
    assert stats["accepted"] >= ROUNDS
    # Slow agents outlived the lease TTL and two live gateways shared the log (issue 12).
    assert stats["turns_longer_than_ttl"] >= 1 and stats["gateways"] == 2


def test_the_harness_prints_rounds_kills_and_violations(tmp_path, capsys):
    assert harness_main(["--rounds", "2", "--seed", "3", "--workdir", str(tmp_path)]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    rounds, kills, violations = (part.split("=") for part in line.split())
    assert (rounds[0], kills[0], violations[0]) == ("rounds", "kills", "violations")
    assert rounds[1] == "2" and violations[1] == "0" and 0 <= int(kills[1]) <= 3  # round 1 has two gateways


# -- the checker catches each kind of violation ----------------------------------------------------

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture()
def gateway(tmp_path: Path):
    t = Turnlog(tmp_path / "gateway.db", clock=ManualClock(T0))
    t.start_gateway("harness")
    adapter = FakeAdapter(tmp_path / "sent.jsonl")
    t.handle_message(alice("m1"), "hello", lambda h, i: "reply to m1", adapter.sender(alice("m1")))
    yield t, adapter, tmp_path / "sent.jsonl"
    t.close()


def violations(t: Turnlog, sent: Path, stop: bool = True) -> list[str]:
    if stop:
        t.stop_gateway()
    return Checker().read(t).check(str(sent)).violations


def test_the_checker_passes_a_clean_run(gateway):
    t, adapter, sent = gateway
    assert violations(t, sent) == []


def test_the_checker_catches_a_resend_without_the_prefix(gateway):
    t, adapter, sent = gateway
    adapter.sender()("reply to m1")
    assert any("without the recovered prefix" in v for v in violations(t, sent))


def test_the_checker_catches_a_send_without_a_recorded_attempt(gateway):
    t, adapter, sent = gateway
    adapter.sender()(PREFIX + " — whatever:\n\nreply to m1")
    adapter.sender()("a reply nobody recorded")
    found = violations(t, sent)
    assert any("more often than attempted" in v or "recorded attempts" in v for v in found)
    assert any("the ledger has 0 rows" in v for v in found)


def test_the_checker_catches_a_delivered_reply_that_was_never_sent(gateway):
    t, adapter, sent = gateway
    sent.write_text("")
    assert any("recorded delivered but never sent" in v for v in violations(t, sent))


def test_the_checker_catches_a_resume_with_nothing_to_resume(gateway):
    t, adapter, sent = gateway
    t.mark_resume_pending(alice("m1"), "restart_interrupted")
    t.resume_interrupted(lambda h, i: "resumed for nothing", adapter.sender())
    assert any("resumed with no interruption" in v for v in violations(t, sent))


def test_the_checker_catches_a_lost_message(gateway):
    t, adapter, sent = gateway
    t.accept(alice("m2"), "are you there?")
    t.command(alice("m3"), "/stop")  # drops the waiting message: the harness never does this
    assert any("dropped" in v and "lost" in v for v in violations(t, sent))


def test_the_checker_catches_a_suspension_without_a_stuck_loop(gateway):
    t, adapter, sent = gateway
    t.suspend(alice("m1"), "stuck_loop")
    assert any("suspended as stuck_loop after 0 interrupted" in v for v in violations(t, sent))


def test_the_checker_catches_an_unclean_final_boot(gateway):
    t, adapter, sent = gateway
    assert any("did not stop cleanly" in v for v in violations(t, sent, stop=False))


def test_the_checker_catches_a_reply_still_owed(gateway):
    t, adapter, sent = gateway
    def refuse(text):
        raise ConnectionError("down")
    t.handle_message(alice("m2"), "again", lambda h, i: "reply to m2", refuse)
    assert any("still owed" in v for v in violations(t, sent))
