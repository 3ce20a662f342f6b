"""Metrics (docs/operations.md "Metrics and traces"): the log's counts read at scrape time from
the read models equal what the log holds, in any process; this process's histograms and counters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from prometheus_client import generate_latest

from turnlog import EngineConfig, StaleLease

from chat import alice, echo
from metrics_workload import logged, run_workload, samples, scraped

ONE_TRY = EngineConfig(delivery_max_attempts=2)


def test_a_scrape_after_a_workload_shows_the_counts_the_log_holds(make_turnlog):
    t = make_turnlog(owner="gw-a", config=ONE_TRY)
    run_workload(t)
    holds = logged(t)
    assert holds["deliveries"]["dead"] == 1 and holds["deliveries"]["delivered"] == 2  # the workload did its part
    assert holds["refused"] == {"message_id": 1} and holds["started"] == 3
    assert scraped(generate_latest(t.metrics()).decode()) == holds


def test_another_process_and_a_restart_scrape_the_same_counts(make_turnlog):
    t = make_turnlog(owner="gw-a", config=ONE_TRY)
    run_workload(t)
    first = scraped(generate_latest(t.metrics()).decode())
    t.close()
    again = make_turnlog(owner="gw-b", config=ONE_TRY)  # nothing in process memory carried over
    assert scraped(generate_latest(again.metrics()).decode()) == first == logged(again)


def test_boots_inbox_depth_and_projection_lag_are_read_from_the_log(make_turnlog):
    t = make_turnlog(owner="gw-a")
    t.start_gateway("main")
    t.accept(alice("m9"), "waiting")
    got = samples(generate_latest(t.metrics()).decode())
    assert got[("turnlog_boots_alive", (("gateway", "main"),))] == 1
    assert got[("turnlog_inbox_items", (("state", "pending"),))] == 1
    assert got[("turnlog_projection_lag_events", (("projection", "counts"),))] == 0
    t.stop_gateway()
    assert samples(generate_latest(t.metrics()).decode())[("turnlog_boots_alive", (("gateway", "main"),))] == 0


def test_turn_latency_is_split_into_engine_and_agent_time_per_process(make_turnlog, clock):
    t = make_turnlog(owner="gw-a")
    registry = t.metrics()
    t.handle_message(alice("m1"), "hello", echo, lambda text: None)
    got = samples(generate_latest(registry).decode())
    for part in ("engine", "agent", "send"):
        assert got[("turnlog_turn_seconds_count", (("part", part), ("process", "gw-a")))] == 1
    assert t.metrics() is registry


def test_stale_writes_and_takeovers_are_counted_in_the_process_that_saw_them(make_turnlog, clock):
    a = make_turnlog(owner="gw-a")
    b = make_turnlog(owner="gw-b")
    a.metrics(), b.metrics()
    sid = a.get_or_create_session(alice()).session_id
    token = a.turns.acquire_lease(sid, "k")
    clock.advance(10_000)  # the lease expires unrenewed
    b.turns.acquire_lease(sid, "k", timeout=0)
    try:
        a.turns.append_message(token, "user", "late")
    except StaleLease:
        pass
    got_a = samples(generate_latest(a.metrics()).decode())
    got_b = samples(generate_latest(b.metrics()).decode())
    assert got_a[("turnlog_stale_writes_refused_total", (("process", "gw-a"),))] == 1
    assert got_b[("turnlog_lease_takeovers_total", (("process", "gw-b"),))] == 1
    assert ("turnlog_lease_takeovers_total", (("process", "gw-a"),)) not in got_a or \
        got_a[("turnlog_lease_takeovers_total", (("process", "gw-a"),))] == 0
    assert got_b[("turnlog_lease_wait_seconds_count", (("process", "gw-b"),))] == 1


def test_without_the_extras_turns_run_and_metrics_say_what_to_install(tmp_path):
    script = f"""
import sys
sys.modules["prometheus_client"] = None  # neither extra installed
sys.modules["opentelemetry"] = None
sys.path.insert(0, {str(Path(__file__).parents[1])!r})
import turnlog
from chat import alice, echo
t = turnlog.open({str(tmp_path / "t.db")!r})
t.handle_message(alice("m1"), "hi", echo, lambda text: None)
try:
    t.metrics()
except turnlog.InvalidRequest as e:
    print(e)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "metrics need prometheus-client: pip install 'turnlog[metrics]'"


def test_the_grafana_dashboard_charts_only_series_turnlog_exposes(make_turnlog):
    import json
    import re

    dashboard = json.loads((Path(__file__).parents[2] / "docs" / "grafana-turnlog.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    charted = {re.sub(r"_(bucket|total)$", "", name) for e in exprs for name in re.findall(r"turnlog_\w+", e)}
    t = make_turnlog(owner="gw-a")
    exposed = {family.name for family in t.metrics().collect()}
    assert charted == exposed  # every series charted, and nothing charted that is not there


def test_a_read_only_scrape_reports_how_far_the_read_models_are_behind(make_turnlog, clock):
    t = make_turnlog(owner="gw-a")
    t.handle_message(alice("m1"), "hello", echo, lambda text: None)
    t.maintenance.catch_up()
    for message_id in ("m2", "m3"):  # writes do not catch the read models up; reads do
        clock.advance(5)
        t.handle_message(alice(message_id), "later", echo, lambda text: None)
    reader = make_turnlog(read_only=True, create=False)
    got = samples(generate_latest(reader.metrics()).decode())
    [counts] = [p for p in reader.maintenance.projection_status() if p.name == "counts"]
    assert got[("turnlog_projection_lag_events", (("projection", "counts"),))] == counts.behind > 0
    # The oldest event it has not applied (m2's) is 5 s older than the log's last (m3's).
    assert got[("turnlog_projection_lag_seconds", (("projection", "counts"),))] == 5.0
    assert got[("turnlog_turns_started_total", ())] == 1  # as of the model's position


def test_a_read_only_file_older_than_the_counts_model_leaves_its_series_out(make_turnlog, db):
    import sqlite3

    t = make_turnlog(owner="gw-a")
    t.handle_message(alice("m1"), "hello", echo, lambda text: None)
    t.maintenance.catch_up()
    t.close()
    with sqlite3.connect(db) as older:  # as a file last written before the counts model existed
        older.execute("DROP TABLE event_counts")
        older.execute("DELETE FROM projection_positions WHERE name='counts'")
    reader = make_turnlog(read_only=True, create=False)
    got = samples(generate_latest(reader.metrics()).decode())
    assert not any(name.startswith("turnlog_turns_") for name, _ in got)  # unknown, not 0
    assert got[("turnlog_projection_lag_events", (("projection", "counts"),))] > 0
    assert got[("turnlog_deliveries", (("state", "delivered"),))] == 1
