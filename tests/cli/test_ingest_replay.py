"""`turnlog ingest` as a replay users rely on after a crash: bad records skipped, idempotent runs,
a killed ingest recovered and finished, leases by the wall clock, streaming, concurrent ingests."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from turnlog import LeaseTimeout, SessionSource, SystemClock, Turnlog
from turnlog.cli import main
from turnlog.ingest import ReplayClock

from harness.procs import child_env

DEADLINE_S = 300.0  # generous: the machine is shared and slow


def dm(n):
    return {"platform": "telegram", "chat_type": "dm", "chat_id": str(n), "user_id": str(n)}


def record(**fields):
    return json.dumps({"op": "message", **fields})


def traffic(count, keys=5, prefix="", with_ids=True):
    """`count` messages spread over `keys` DMs, each with its own text and reply."""
    lines = []
    for n in range(count):
        fields = {"source": dm(n % keys), "text": f"{prefix}msg {n}", "reply": f"{prefix}reply {n}",
                  "at": f"2026-11-01T{10 + n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"}
        if with_ids:
            fields["message_id"] = f"{prefix}m{n}"
        lines.append(record(**fields))
    return "\n".join(lines) + "\n"


def contents(db, role):
    with Turnlog(db) as t:
        return [m["content"] for s in t.sessions() for m in t.transcript(s.session_id) if m["role"] == role]


def replies_in(db):
    return sorted(part for content in contents(db, "assistant") for part in content.split("\n"))


def open_items(db):
    with Turnlog(db) as t:
        return [row for key in {s.session_key for s in t.sessions()} for row in t.queue(key)]


def turnlog_cmd(db, *args):
    return [sys.executable, "-c", "from turnlog.cli import main; main()", "--db", str(db), *args]


def test_one_bad_record_is_reported_and_skipped_and_never_ends_the_run(tmp_path, monkeypatch):
    db = str(tmp_path / "i.db")
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join([
        record(source=dm(1), text="first", message_id="a", reply="one").encode(),
        record(source=dm(1), text="far future", message_id="b", at="9999-12-31T23:59:59Z", reply="x").encode(),
        b'{"op": "message", "source": {"platform": "telegram", "chat_id": "1"}, "text": "caf\xe9", "reply": "x"}',
        record(source=dm(2), text="boom", message_id="c", reply="x").encode(),
        record(source=dm(1), text="last", message_id="d", reply="two").encode(),
    ]) + b"\n")
    real_accept = Turnlog.accept

    def accept(self, source, text, **kw):
        if text == "boom":
            raise RuntimeError("the disk caught fire")
        return real_accept(self, source, text, **kw)
    monkeypatch.setattr(Turnlog, "accept", accept)

    result = CliRunner().invoke(main, ["--db", db, "ingest", str(path), "--json"])

    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert (report["lines"], report["applied"], report["turns"]) == (5, 2, 2)
    assert [e["line"] for e in report["errors"]] == [2, 3, 4]
    assert "line 2: at is out of range: '9999-12-31T23:59:59Z'" in result.stderr
    assert "line 3: invalid UTF-8 at byte" in result.stderr
    assert "line 4: RuntimeError: the disk caught fire" in result.stderr
    assert "Traceback" not in result.output
    assert contents(db, "user") == ["first", "last"] and contents(db, "assistant") == ["one", "two"]


def test_rerunning_the_same_file_duplicates_nothing(tmp_path):
    db = str(tmp_path / "i.db")
    path = tmp_path / "t.jsonl"
    path.write_text(traffic(12, keys=3) + traffic(3, keys=3, prefix="anon ", with_ids=False) + "\n".join([
        json.dumps({"op": "command", "source": dm(0), "text": "/new", "message_id": "c1"}),
        json.dumps({"op": "command", "source": dm(1), "text": "/new", "at": "2026-11-02T00:00:00Z"}),
        record(source=dm(0), text="waiting", message_id="q1"),
    ]) + "\n")

    first = CliRunner().invoke(main, ["--db", db, "ingest", str(path), "--json"])
    assert first.exit_code == 0, first.output
    with Turnlog(db) as t:
        before = (len(t.sessions()), len(t.ledger()), len(t.queue("agent:main:telegram:dm:0")))
    again = CliRunner().invoke(main, ["--db", db, "ingest", str(path), "--json"])

    assert again.exit_code == 0, again.output
    report = json.loads(again.stdout)
    assert (report["applied"], report["turns"], report["duplicates"], report["queued"]) == (0, 0, 18, 0)  # every line refused
    with Turnlog(db) as t:
        assert (len(t.sessions()), len(t.ledger()), len(t.queue("agent:main:telegram:dm:0"))) == before == (3, 15, 1)
    users = contents(db, "user")
    assert sorted(users) == sorted({*users}) and len(users) == 15
    assert replies_in(db) == sorted([f"reply {n}" for n in range(12)] + [f"anon reply {n}" for n in range(3)])


def _wait_for(predicate, what, proc=None):
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        assert proc is None or proc.poll() is None, f"the ingest ended (exit {proc.returncode}) before {what}"
        time.sleep(0.05)


def _count(db, topic):
    try:
        # Read-only: a plain connect would create an empty file that the starting ingest refuses.
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as con:
            return con.execute("SELECT COUNT(*) FROM stored_events WHERE topic=?", (topic,)).fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _ingest_killed_mid_run(tmp_path, count=300):
    db = str(tmp_path / "i.db")
    path = tmp_path / "t.jsonl"
    path.write_text(traffic(count, keys=6))
    proc = subprocess.Popen(turnlog_cmd(db, "ingest", str(path)), env=child_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: _count(db, "turnlog:MessageAppended") >= 60, "the ingest to get going", proc)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(60)
    assert _count(db, "turnlog:InboundCompleted") < count  # killed part-way
    return db, path


def test_sigkill_mid_ingest_then_the_same_run_again_duplicates_nothing_and_finishes_everything(tmp_path):
    db, path = _ingest_killed_mid_run(tmp_path)
    # The killed run's lease was taken moments ago: the re-run must not wait for it (it used to wait
    # up to the lease timeout, 1800 s), so a short timeout makes waiting a failure.
    env = {**child_env(), "TURNLOG_TURN_LEASE_TIMEOUT": "20"}
    rerun = subprocess.run(turnlog_cmd(db, "ingest", str(path), "--json"), env=env, capture_output=True, text=True,
                           timeout=DEADLINE_S)

    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    assert report["failed"] == 0 and report["replies_not_recorded"] == []
    assert report["duplicates"] > 0
    users = contents(db, "user")
    assert sorted(users) == sorted(f"msg {n}" for n in range(300))  # each once
    assert replies_in(db) == sorted(f"reply {n}" for n in range(300))
    assert open_items(db) == []
    with Turnlog(db) as t:
        assert {d.state for d in t.ledger()} == {"delivered"}
        assert t.status("ingest").active_turns == []


def test_recover_cleans_up_after_a_killed_ingest(tmp_path):
    db, path = _ingest_killed_mid_run(tmp_path)

    result = CliRunner().invoke(main, ["--db", db, "recover", "--gateway", "ingest", "--json"])

    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["recovered_boots"]) == 1
    with Turnlog(db) as t:
        status = t.status("ingest")
        assert status.last_boot.ended_clean is False and status.active_turns == []
        # A reply owed by the killed turn is redelivered by the next sweep (recovery's rule), and
        # an item cut off before its reply is kept for the resumed turn (recovery's rule): its session
        # waits to be resumed, which the next ingest of this gateway does.
        sessions = {s.session_id: s for s in t.sessions()}
        started = [row for key in {s.session_key for s in sessions.values()} for row in t.queue(key)
                   if row.state == "started"]
        assert all(sessions[row.session_id].resume_pending for row in started)
    rerun = CliRunner().invoke(main, ["--db", db, "ingest", str(path), "--json"])
    assert rerun.exit_code == 0, rerun.output
    assert open_items(db) == []
    assert replies_in(db) == sorted(f"reply {n}" for n in range(300))
    with Turnlog(db) as t:
        assert {d.state for d in t.ledger()} == {"delivered"}


def test_replayed_leases_expire_by_the_wall_clock_not_the_records_time(tmp_path):
    db = str(tmp_path / "i.db")
    replay = ReplayClock()
    replay.set("2020-01-01T00:00:00+00:00")  # a record from long ago
    with Turnlog(db, clock=replay) as ingesting, Turnlog(db, clock=SystemClock()) as live:
        token = ingesting.turns.acquire_lease("s1", "key")
        assert token.expires_at > SystemClock().now()
        with pytest.raises(LeaseTimeout):  # a live holder keeps it, however old its records are
            live.turns.acquire_lease("s1", "key", timeout=0)
        assert ingesting.turns.append_message(token, "user", "still mine").seq == 1


def test_ingest_from_a_pipe_applies_each_line_as_it_arrives_with_progress_on_stderr(tmp_path):
    db = str(tmp_path / "i.db")
    Turnlog(db).close()
    proc = subprocess.Popen(turnlog_cmd(db, "ingest", "-", "--progress-every", "1"), env=child_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for n in range(2):
            proc.stdin.write((record(source=dm(1), text=f"live {n}", message_id=f"p{n}", reply=f"ok {n}") + "\n")
                             .encode())
            proc.stdin.flush()
            # The pipe stays open: the line must be applied now, not at the end of the input.
            _wait_for(lambda: _count(db, "turnlog:InboundCompleted") == n + 1, f"line {n + 1} to be applied", proc)
        out, err = proc.communicate(timeout=DEADLINE_S)  # closes stdin: the end of the input
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert b"ingest: 1 lines, 1 applied, 0 failed" in err and b"ingest: 2 lines, 2 applied, 0 failed" in err
    assert b"2 records applied (2 turns" in out


def test_concurrent_ingests_on_the_same_keys_record_every_reply(tmp_path):
    db = str(tmp_path / "i.db")
    Turnlog(db).close()
    runs, per_run = 6, 100
    procs = []
    for r in range(runs):
        path = tmp_path / f"t{r}.jsonl"
        path.write_text(traffic(per_run, keys=5, prefix=f"p{r} "))
        procs.append(subprocess.Popen(turnlog_cmd(db, "ingest", str(path), "--gateway", f"ingest-{r}", "--json"),
                                      env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=DEADLINE_S * 2)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))

    assert all(r["applied"] == per_run and r["failed"] == 0 and r["replies_not_recorded"] == [] for r in reports)
    assert replies_in(db) == sorted(f"p{r} reply {n}" for r in range(runs) for n in range(per_run))
    merged_users = [part for content in contents(db, "user") for part in content.split("\n")]  # bursts merge
    assert sorted(merged_users) == sorted(f"p{r} msg {n}" for r in range(runs) for n in range(per_run))
    assert open_items(db) == []


def test_ingest_help_documents_the_jsonl_format():
    result = CliRunner().invoke(main, ["ingest", "--help"])
    assert result.exit_code == 0
    for field in ('{"op": "message", "source": {...}, "text": "hi", "message_id": "m1",', '"reply": "hello!"}',
                  '{"op": "command"', "message_id  optional", "at        optional", "reply     optional"):
        assert field in result.output, field


def test_the_report_names_a_reply_that_was_not_recorded_and_why(tmp_path):
    db = str(tmp_path / "i.db")
    path = tmp_path / "t.jsonl"
    wx = {"platform": "weixin", "chat_type": "dm", "chat_id": "u1", "user_id": "u1"}
    path.write_text("\n".join([
        record(source=wx, text="ok", message_id="w1", at="2026-11-01T10:00:00Z", reply="first answer"),
        record(source=wx, text="ok", message_id="w2", at="2026-11-01T10:01:00Z", reply="second answer"),
    ]) + "\n")

    result = CliRunner().invoke(main, ["--db", db, "ingest", str(path), "--json"])

    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert (report["applied"], report["duplicates"], report["failed"]) == (1, 1, 0)
    assert report["replies_not_recorded"] == [
        {"line": 2, "reason": "its message was refused as a repeat of another text: no turn ran it"}]
    assert "line 2: reply not recorded: its message was refused as a repeat" in result.stderr
    assert replies_in(db) == ["first answer"]


def test_an_ingest_leaves_the_replies_other_gateways_owe_alone(tmp_path):
    db = str(tmp_path / "i.db")

    def offline(text):
        raise ConnectionError("platform down")
    with Turnlog(db) as t:
        t.start_gateway("main")
        t.handle_message(SessionSource(platform="telegram", chat_type="dm", chat_id="9", user_id="9"), "hi",
                         lambda h, i: "owed", offline)
    path = tmp_path / "t.jsonl"
    path.write_text(traffic(3))

    assert CliRunner().invoke(main, ["--db", db, "ingest", str(path)]).exit_code == 0
    with Turnlog(db) as t:
        assert [d.state for d in t.ledger() if d.content == "owed"] == ["failed"]  # still owed to its user
