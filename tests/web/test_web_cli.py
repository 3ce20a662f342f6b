"""`turnlog web` as a command: bad options are one line, and a real server bound off loopback
answers 401 without its token."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest
from click.testing import CliRunner

import web_db
from turnlog.cli import main

WAIT_S = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def test_off_loopback_without_a_token_is_refused(tmp_path):
    db = str(tmp_path / "log.db")
    web_db.build(db)
    result = CliRunner().invoke(main, ["--db", db, "web", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "--host 0.0.0.0 is not loopback: give --token" in result.output
    assert "Traceback" not in result.output
    empty = CliRunner().invoke(main, ["--db", db, "web", "--token", " "])
    assert empty.exit_code == 2 and "--token must not be empty" in empty.output


def test_a_missing_database_is_one_line(tmp_path):
    result = CliRunner().invoke(main, ["web", "--db", str(tmp_path / "nope.db")])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"Error: no database file {tmp_path / 'nope.db'}"]
    assert not (tmp_path / "nope.db").exists()


def test_a_database_that_is_not_turnlogs_is_one_line_and_untouched(tmp_path):
    import hashlib
    import sqlite3

    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:  # another eventsourcing application's file
        conn.execute("CREATE TABLE stored_events (originator_id TEXT, originator_version INTEGER, topic TEXT,"
                     " state BLOB)")
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    result = CliRunner().invoke(main, ["web", "--db", str(db)])
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert f"{db} is an SQLite database but not a turnlog one" in result.output
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_a_port_in_use_or_a_host_that_is_no_address_is_one_line(tmp_path):
    db = str(tmp_path / "log.db")
    web_db.build(db)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["--db", db, "web", "--port", str(port)])
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines() == [f"Error: cannot listen on 127.0.0.1:{port}: address already in use"]
    nowhere = CliRunner().invoke(main, ["--db", db, "web", "--host", "999.1.1.1", "--token", "t", "--port", "0"])
    assert nowhere.exit_code == 1, nowhere.output
    assert nowhere.output.strip().splitlines()[-1].startswith("Error: cannot listen on 999.1.1.1:0: ")


def test_served_off_loopback_every_request_needs_the_token(tmp_path):
    db = str(tmp_path / "log.db")
    web_db.build(db)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "turnlog", "web", "--db", db, "--host", "0.0.0.0",
                             "--port", str(port), "--token", "tok-123"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + WAIT_S
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                first = httpx.get(base + "/", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        assert first.status_code == 401
        assert httpx.get(base + "/sessions?format=json", timeout=5).status_code == 401
        assert httpx.get(base + "/", params={"token": "nope"}, timeout=5).status_code == 401
        ok = httpx.get(base + "/sessions?format=json", headers={"Authorization": "Bearer tok-123"}, timeout=5)
        assert ok.status_code == 200 and len(ok.json()["sessions"]) == 3
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    assert "Warning: serving on 0.0.0.0" in err


@pytest.mark.parametrize("host, shown", [("a" * 70 + ".example", "a" * 70 + ".example"),  # a label over 63
                                         ("bad\x1b[2Jhost", "bad\\x1b[2Jhost")])
def test_a_host_that_cannot_be_resolved_is_one_line_shown_safely(tmp_path, host, shown):
    db = str(tmp_path / "log.db")
    web_db.build(db)
    result = CliRunner().invoke(main, ["--db", db, "web", "--host", host, "--token", "t", "--port", "0"])
    assert result.exit_code == 1, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"Error: cannot listen on {shown}:0: "), line
    assert "\x1b" not in line and "TURNLOG_DEBUG" not in line
