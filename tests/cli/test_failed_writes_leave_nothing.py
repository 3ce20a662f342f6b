"""A write command that fails on a database it created, having recorded nothing, leaves nothing
behind: no database, no -wal/-shm, no key file, no --views file. What a write accepted stays."""

from __future__ import annotations

import json

import pytest

from turnlog import Turnlog
from harness.cli import run

DM = {"platform": "telegram", "chat_type": "dm", "chat_id": "1", "user_id": "1"}
NO_DELIVERY = "00000000-0000-0000-0000-000000000000"


def files_in(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("args, code", [
    (["suspend", "nosuchkey"], 1),
    (["title", "nosuch", "x"], 1),
    (["ingest", "bad.jsonl"], 1),
    (["undo", "nosuch"], 1),
    (["switch", "nosuch", "abc"], 1),
    (["ledger", "retry", NO_DELIVERY], 1),
    (["restore-archive", "bad.jsonl"], 1),
    (["rebuild", "nosuch"], 2),  # a usage mistake the library finds after the open
    (["erase", "--subject", "nosuch"], 2),
    (["--views", "v.db", "suspend", "nosuchkey"], 1),
], ids=lambda v: " ".join(v) if isinstance(v, list) else str(v))
def test_a_failed_write_on_a_new_database_leaves_the_folder_as_it_was(tmp_path, monkeypatch, args, code):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.jsonl").write_text("not json\n")
    before = files_in(tmp_path)

    result = run("--db", "new.db", *args)

    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    assert files_in(tmp_path) == before


def test_an_ingest_that_accepted_lines_before_failing_keeps_its_database(tmp_path):
    db = tmp_path / "new.db"
    traffic = tmp_path / "traffic.jsonl"
    traffic.write_text("\n".join([
        json.dumps({"op": "message", "source": DM, "text": "hi", "message_id": f"m{n}", "reply": "yo"})
        for n in range(3)
    ] + ["not json"]) + "\n")

    result = run("--db", str(db), "ingest", str(traffic))

    assert result.exit_code == 1 and "line 4: not JSON" in result.stderr, result.output
    assert db.exists() and (tmp_path / "new.db.key").exists()
    with Turnlog(str(db)) as t:
        assert [m["content"] for m in t.transcript(t.sessions()[0].session_id) if m["role"] == "user"] \
            == ["hi", "hi", "hi"]


def test_a_failed_write_never_removes_a_database_that_was_there_before(tmp_path):
    db = tmp_path / "empty.db"
    Turnlog(str(db)).close()  # a database with an empty log, made before the command
    before = files_in(tmp_path)

    result = run("--db", str(db), "suspend", "nosuchkey")

    assert result.exit_code == 1, result.output
    assert files_in(tmp_path) == before
    with Turnlog(str(db)) as t:
        assert t.maintenance.log_head() == 0


def test_a_failed_write_keeps_a_key_file_that_was_there_before(tmp_path):
    made = tmp_path / "made.db"
    Turnlog(str(made)).close()
    db = tmp_path / "new.db"
    (tmp_path / "new.db.key").write_bytes((tmp_path / "made.db.key").read_bytes())
    made.unlink()
    (tmp_path / "made.db.key").unlink()

    result = run("--db", str(db), "suspend", "nosuchkey")

    assert result.exit_code == 1, result.output
    assert files_in(tmp_path) == ["new.db.key"]
