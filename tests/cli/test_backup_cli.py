"""`turnlog backup`, `turnlog restore` and `turnlog copy` at the command line: --json, one-line
errors (exit 2 for usage, 1 for runtime), a progress bar only on a terminal."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from harness import procs
from harness.cli import ok, run
from turnlog import Turnlog

from chat import BOB, alice, collect, echo
from test_cli import assert_one_line_error


@pytest.fixture
def live(tmp_path) -> Path:
    db = tmp_path / "live.db"
    sent: list[str] = []
    with Turnlog(db) as t:
        for i in range(3):
            t.handle_message(alice(f"a{i}"), f"hello {i}", echo, collect(sent))
            t.handle_message(BOB, f"bob {i}", echo, collect(sent))
    return db


def test_backup_prints_its_sha256_and_head_and_restore_puts_it_back(live, tmp_path):
    out = tmp_path / "backup.db"
    report = json.loads(ok("--db", str(live), "backup", str(out), "--json").stdout)
    assert report["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert report["events"] == report["head"] > 0 and report["chain_ok"]
    assert report["key_fingerprint"] == Turnlog(live, read_only=True).key_fingerprint  # encrypted by default
    text = ok("--db", str(live), "backup", str(tmp_path / "second.db")).stdout
    assert f"events: {report['events']} (head position {report['head']}); chain: ok" in text
    assert "sha256: " in text
    restored = json.loads(ok("restore", str(out), "--db", str(tmp_path / "new.db"), "--key-file", f"{live}.key", "--json").stdout)
    assert (restored["sha256"], restored["head"], restored["replaced"]) == (report["sha256"], report["head"], False)
    replaced = ok("restore", str(out), "--db", str(live), "--force").stdout
    assert "(replaced)" in replaced and "chain: ok" in replaced
    assert json.loads(ok("--db", str(live), "verify", "--chain", "--json").stdout)["ok"]


def test_copy_to_an_sqlite_file_reports_and_verifies(live, tmp_path):
    target = tmp_path / "copy.db"
    report = json.loads(ok("--db", str(live), "copy", "--to", str(target), "--batch", "7", "--json").stdout)
    assert report["copied"] == report["events"] == report["head"] and report["chain_ok"]
    assert "sessions" in report["read_models"]
    text = ok("--db", str(live), "copy", "--to", str(target)).stdout
    assert f"copied 0 events to {target}, resumed after position {report['head']}" in text
    sessions = lambda db: json.loads(ok("--db", str(db), "sessions", "--json").stdout)  # noqa: E731
    assert sessions(target) == sessions(live)


@pytest.mark.parametrize("args,code,mentions", [
    (["restore", "{tmp}/backup.db"], 2, "--db PATH"),
    (["restore", "{tmp}/missing.db", "--db", "{tmp}/x.db"], 1, "no backup file"),
    (["restore", "{live}", "--db", "{live}"], 1, "give --force"),
    (["--db", "{live}", "backup", "{live}"], 1, "exists"),
    (["--db", "{live}", "backup", "{tmp}/no/such/folder/b.db"], 1, "no such folder"),
    (["--db", "{live}", "copy"], 2, "--to"),
    (["--db", "{live}", "copy", "--to", "postgresql://localhost/x"], 2, "--to-views"),
    (["--db", "{live}", "copy", "--to", "postgresql://nobody@127.0.0.1:1/x", "--to-views", "{tmp}/v.db"], 1,
     "cannot open"),
    (["--db", "{live}", "copy", "--to", "postgresql:///"], 2, "--to-views"),
    (["--db", "{live}", "copy", "--to", "{live}"], 2, "the source itself"),
    (["--db", "{tmp}/missing.db", "backup", "{tmp}/b.db"], 1, "no turnlog database"),
])
def test_mistakes_are_one_line_errors(live, tmp_path, args, code, mentions):
    args = [a.format(tmp=tmp_path, live=live) for a in args]
    assert_one_line_error(run(*args), code, mentions)


def test_restore_refuses_a_database_a_gateway_has_open(live, tmp_path):
    ok("--db", str(live), "backup", str(tmp_path / "backup.db"))
    holder = procs.start(live, "t = kit.turnlog(); t.sessions(); kit.ready(); kit.hang()", work=tmp_path)
    try:
        procs.wait_for(tmp_path / "ready.json", holder)
        result = run("restore", str(tmp_path / "backup.db"), "--db", str(live), "--force")
        assert_one_line_error(result, 1, f"in use by process {holder.pid}")
    finally:
        holder.kill()
        holder.communicate()  # waits, and closes its pipes


def _stderr_on_a_terminal(*args: str) -> tuple[int, str]:
    main, secondary = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "turnlog", *args], stdout=subprocess.PIPE, stderr=secondary,
                              env={**procs.child_env(), "COLUMNS": "100"}, timeout=procs.CHILD_TIMEOUT_S)
        os.close(secondary)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal's other side is closed: all of it was read
                break
            if not chunk:
                break
            chunks.append(chunk)
        return proc.returncode, b"".join(chunks).decode(errors="replace")
    finally:
        os.close(main)


def test_a_progress_bar_is_drawn_on_a_terminal_only(live, tmp_path):
    code, err = _stderr_on_a_terminal("--db", str(live), "copy", "--to", str(tmp_path / "c.db"), "--batch", "5")
    assert code == 0 and "copying events" in err
    code, err = _stderr_on_a_terminal("--db", str(live), "backup", str(tmp_path / "b.db"))
    assert code == 0 and "backing up" in err
    piped = run("--db", str(live), "backup", str(tmp_path / "b2.db"))
    assert "backing up" not in piped.output


def test_restore_refuses_a_backup_or_a_target_that_is_not_a_database(live, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping list: eggs, milk\n")
    assert_one_line_error(run("restore", str(notes), "--db", str(tmp_path / "x.db")), 1, "not a turnlog database")
    assert not (tmp_path / "x.db").exists()
    (tmp_path / "folder.db").mkdir()
    assert_one_line_error(run("restore", str(live), "--db", str(tmp_path / "folder.db"), "--force"), 1,
                          "is a directory")
    assert notes.read_text() == "shopping list: eggs, milk\n"


def test_a_backup_into_a_read_only_folder_names_the_folder_not_a_temporary(live, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        result = run("--db", str(live), "backup", str(folder / "b.db"))
        assert_one_line_error(result, 1, f"directory {folder} is read-only")
        assert ".backup" not in result.output and os.listdir(folder) == []
    finally:
        folder.chmod(0o755)
