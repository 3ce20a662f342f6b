"""`turnlog metrics --db PATH`: one scrape, in Prometheus' text format or as JSON, with the counts
the log holds, from a process that ran none of the turns."""

from __future__ import annotations

import json

from harness.cli import ok, run
from turnlog import EngineConfig, Turnlog

from metrics_workload import logged, run_workload, scraped


def worked(db) -> dict:
    t = Turnlog(db, config=EngineConfig(delivery_max_attempts=2))
    run_workload(t)
    holds = logged(t)
    t.close()
    return holds


def test_metrics_prints_the_counts_the_log_holds(db):
    holds = worked(db)
    text = ok("--db", db, "metrics").stdout
    assert "# TYPE turnlog_turns_started_total counter" in text
    assert scraped(text) == holds


def test_metrics_json_gives_families_and_samples(db):
    holds = worked(db)
    families = {f["name"]: f for f in json.loads(ok("metrics", "--db", db, "--json").stdout)}
    started = families["turnlog_turns_started"]
    assert started["type"] == "counter" and started["samples"][0]["value"] == holds["started"]
    ledger = {s["labels"]["state"]: s["value"] for s in families["turnlog_deliveries"]["samples"]}
    assert {k: v for k, v in ledger.items() if v} == holds["deliveries"]
    assert "turnlog_turn_seconds" in families  # this process ran no turn: an empty histogram


def test_metrics_of_a_missing_database_is_one_line(tmp_path):
    result = run("--db", str(tmp_path / "nope.db"), "metrics")
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output
