"""SIGKILL at random points of the write path, 200 times (issue 14: the crash acceptance line).

The kill -9 harness (tests/harness) kills child gateways at random moments of their work; every
write they make goes through the sealing recorder and the event compressor. Beyond the harness's
own invariants (no reply lost, sent twice or owed; turns resumed; leases released), the log must
come out whole: every event sealed by its own transaction (no unsealed or broken link, even for
writes cut off by the kill) and every stored state readable.
"""

from __future__ import annotations

import sqlite3

import pytest
from click.testing import CliRunner

from harness.runner import run_harness
from turnlog.cli import main
from turnlog.storage.event_compressor import V2, inflate

pytestmark = pytest.mark.takes_seconds(200)

ROUNDS = 200


def test_two_hundred_kills_of_the_write_path_leave_a_whole_sealed_log(tmp_path, capsys):
    result = run_harness(ROUNDS, seed=11, workdir=tmp_path)
    with capsys.disabled():
        print(f"\n{result.summary()}\n{result.details()}")
    assert result.violations == [], "\n".join(result.violations[:20])
    assert result.kills >= ROUNDS // 5  # loose: where kills land depends on the machine's load

    db = tmp_path / "gateway.db"
    chain = CliRunner().invoke(main, ["--db", str(db), "verify", "--chain"])
    assert (chain.exit_code, chain.output) == (0, "chain: ok\n")

    conn = sqlite3.connect(db)
    try:
        states = [row[0] for row in conn.execute("SELECT state FROM stored_events")]
        sealed = conn.execute("SELECT count(*) FROM chain").fetchone()[0]
    finally:
        conn.close()
    assert sealed == len(states)
    assert sum(s[:1] == V2 for s in states) > len(states) // 2  # the compact form was really written
    assert all(inflate(s).startswith(b"{") for s in states)

    projections = CliRunner().invoke(main, ["--db", str(db), "verify"])
    assert projections.exit_code == 0, projections.output
