"""`turnlog archive`, `restore-archive` and `compact-file` at the command line: --json, the
sessions listed as archived, `verify --chain` after each, one-line errors (2 usage, 1 runtime)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from harness import procs
from harness.cli import ok, run
from turnlog import ManualClock, Turnlog

from chat import BOB, alice, collect, echo
from test_cli import assert_one_line_error


@pytest.fixture
def live(tmp_path) -> Path:
    """A database whose first Alice session ended in 2020: long archivable by any clock now."""
    db = tmp_path / "live.db"
    sent: list[str] = []
    with Turnlog(db, clock=ManualClock("2020-01-01T00:00:00+00:00")) as t:
        for i in range(5):
            t.handle_message(alice(f"a{i}"), f"hello {i}", echo, collect(sent))
        t.command(alice("reset"), "/reset")
    with Turnlog(db) as t:  # the gateway's clock: now
        t.handle_message(BOB, "bob", echo, collect(sent))
    return db


def old_session(db: Path) -> str:
    with Turnlog(db) as t:
        return next(s.session_id for s in t.sessions() if s.end_reason)


def test_archive_then_restore_archive_at_the_command_line(live, tmp_path):
    old = old_session(live)
    out = tmp_path / "old.tlar"
    dry = json.loads(ok("--db", str(live), "archive", str(out), "--older-than", "90d", "--dry-run", "--json").stdout)
    assert dry["dry_run"] and [s["session_id"] for s in dry["sessions"]] == [old] and not out.exists()
    report = json.loads(ok("--db", str(live), "archive", str(out), "--older-than", "90d", "--json").stdout)
    assert [s["session_id"] for s in report["sessions"]] == [old] and report["sessions"][0]["rule"] == "ended"
    assert report["events"] > 10 and len(report["sha256"]) == 64 and report["bytes"] == out.stat().st_size
    assert json.loads(ok("--db", str(live), "verify", "--chain", "--json").stdout)["ok"]
    listed = ok("--db", str(live), "sessions").stdout
    assert f"archived in {out} sha256 {report['sha256'][:12]}" in listed
    assert f"archived in {out}" in ok("--db", str(live), "show", old).stdout
    assert "SessionArchived" in ok("--db", str(live), "history", old).stdout

    restored = json.loads(ok("--db", str(live), "restore-archive", str(out), "--json").stdout)
    assert (restored["sessions"], restored["events"], restored["already_restored"]) == ([old], report["events"], False)
    assert json.loads(ok("--db", str(live), "verify", "--chain", "--json").stdout)["ok"]
    assert "hello 4" in ok("--db", str(live), "show", old).stdout
    again = ok("--db", str(live), "restore-archive", str(out)).stdout
    assert "was restored already: nothing done" in again


def test_archive_says_so_when_nothing_is_old_enough(live, tmp_path):
    text = ok("--db", str(live), "archive", str(tmp_path / "x.tlar"), "--older-than", "100y").stdout
    assert text.strip() == "no session to archive" and not (tmp_path / "x.tlar").exists()


@pytest.mark.parametrize("args, mentions", [
    (["--older-than", "ninety"], "not a duration"),
    (["--idle-for", "12"], "not a duration"),
    # past what a timedelta holds (999999999 days): a usage error, not an OverflowError
    (["--older-than", "99999999999d"], "too long"),
    (["--idle-for", "99999999999999999999y"], "too long"),
])
def test_a_bad_duration_is_a_usage_error(live, tmp_path, args, mentions):
    assert_one_line_error(run("--db", str(live), "archive", str(tmp_path / "x.tlar"), *args), 2, mentions)


def test_an_existing_out_is_never_replaced(live, tmp_path):
    out = tmp_path / "old.tlar"
    out.write_text("keep me")
    assert_one_line_error(run("--db", str(live), "archive", str(out), "--older-than", "90d"), 2, "exists")
    assert out.read_text() == "keep me"


def test_a_missing_or_damaged_archive_is_a_one_line_error(live, tmp_path):
    assert_one_line_error(run("--db", str(live), "restore-archive", str(tmp_path / "none.tlar")), 2, "no archive file")
    junk = tmp_path / "junk.tlar"
    junk.write_bytes(b"PK\x03\x04 not really a zip")
    assert_one_line_error(run("--db", str(live), "restore-archive", str(junk)), 1, "not a readable turnlog archive")


def test_compact_file_gives_an_old_database_its_free_pages_back(tmp_path):
    db = tmp_path / "old.db"
    with Turnlog(db) as t:
        for i in range(20):
            t.handle_message(alice(f"a{i}"), f"hello {i} " + "y" * 2000, echo, collect([]))
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA auto_vacuum=NONE")
    conn.execute("VACUUM")  # as a database made before incremental vacuum was
    conn.execute("CREATE TABLE filler (x BLOB)")
    conn.executemany("INSERT INTO filler VALUES (randomblob(4096))", [()] * 200)
    conn.commit()
    conn.execute("DROP TABLE filler")
    conn.commit()
    assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    conn.close()
    report = json.loads(ok("--db", str(db), "compact-file", "--json").stdout)
    assert report["bytes_after"] < report["bytes_before"] - 500_000
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # reclaims by itself from now on
    conn.close()
    assert json.loads(ok("--db", str(db), "verify", "--chain", "--json").stdout)["ok"]


def test_compact_file_refuses_a_database_a_gateway_has_open(live, tmp_path):
    holder = procs.start(live, "t = kit.turnlog(); t.sessions(); kit.ready(); kit.hang()", work=tmp_path)
    try:
        procs.wait_for(tmp_path / "ready.json", holder)
        assert_one_line_error(run("--db", str(live), "compact-file"), 1, f"in use by process {holder.pid}")
    finally:
        holder.kill()
        holder.communicate()  # waits, and closes its pipes
