"""`turnlog ingest` of records without a message_id: each line is its own record (issue 19, item 13).

Equal lines of one file stay distinct (a user says "continue" twice; a chat is reset twice), a re-run
of the same file is refused line by line, and a refused record is counted as a duplicate, not applied.
"""

import json

from click.testing import CliRunner

from turnlog import Turnlog
from turnlog.cli import main

DM = {"platform": "telegram", "chat_type": "dm", "chat_id": "1", "user_id": "1"}
KEY = "agent:main:telegram:dm:1"


def message(text, reply):
    return json.dumps({"op": "message", "source": DM, "text": text, "reply": reply})


def command(text, **extra):
    return json.dumps({"op": "command", "source": DM, "text": text, **extra})


# No message_id and no "at" anywhere: only where a line stands tells equal lines apart.
CHAT = [
    message("continue", "one"),
    message("something else", "two"),
    message("continue", "three"),
    command("/new"),
    message("after the first reset", "four"),
    command("/new"),
    message("after the second reset", "five"),
]


def transcripts(db):
    with Turnlog(db) as t:
        sessions = sorted(t.sessions(), key=lambda s: s.created_at)
        return [[m["content"] for m in t.transcript(s.session_id)] for s in sessions]


def ingest(db, path, *args):
    return CliRunner().invoke(main, ["--db", db, "ingest", str(path), "--json", *args])


def test_repeated_lines_without_ids_are_distinct_records_and_a_rerun_duplicates_nothing(tmp_path):
    db = str(tmp_path / "i.db")
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(CHAT) + "\n")

    first = ingest(db, path)

    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert (report["applied"], report["turns"], report["commands"], report["duplicates"]) == (7, 5, 2, 0)
    expected = [["continue", "one", "something else", "two", "continue", "three"],
                ["after the first reset", "four"],
                ["after the second reset", "five"]]  # the second /new started a session of its own
    assert transcripts(db) == expected

    again = ingest(db, path)

    assert again.exit_code == 0, again.output
    report = json.loads(again.stdout)
    assert (report["applied"], report["turns"], report["commands"], report["duplicates"]) == (0, 0, 0, 7)
    assert transcripts(db) == expected


def test_the_same_file_named_by_another_path_is_the_same_file(tmp_path, monkeypatch):
    db = str(tmp_path / "i.db")
    (tmp_path / "chat.jsonl").write_text("\n".join(CHAT) + "\n")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "chat.jsonl")
    assert ingest(db, tmp_path / "chat.jsonl").exit_code == 0
    monkeypatch.chdir(tmp_path)

    for name in ("chat.jsonl", "./chat.jsonl", "link.jsonl"):
        again = ingest(db, name)
        assert again.exit_code == 0, again.output
        assert json.loads(again.stdout)["duplicates"] == 7, name
    assert len(transcripts(db)) == 3


def test_repeated_lines_on_stdin_are_distinct_records(tmp_path):
    db = str(tmp_path / "i.db")
    stdin = "\n".join(CHAT) + "\n"

    first = CliRunner().invoke(main, ["--db", db, "ingest", "-"], input=stdin)
    again = CliRunner().invoke(main, ["--db", db, "ingest", "-"], input=stdin)

    assert first.exit_code == 0, first.output
    assert "7 records applied (5 turns, 2 commands, 0 queued), 0 duplicates, 0 failed" in first.output
    assert again.exit_code == 0, again.output
    assert "0 records applied (0 turns, 0 commands, 0 queued), 7 duplicates, 0 failed" in again.output
    assert len(transcripts(db)) == 3


def test_a_refused_command_counts_as_a_duplicate_not_as_applied(tmp_path):
    db = str(tmp_path / "i.db")
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join([
        message("hello", "hi"),
        command("/new", message_id="c1"),
        command("/new", message_id="c1"),  # the platform redelivered it: refused, no second reset
        message("next", "yes"),
    ]) + "\n")

    result = ingest(db, path)

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["lines"], report["applied"], report["commands"], report["duplicates"]) == (4, 3, 1, 1)
    assert transcripts(db) == [["hello", "hi"], ["next", "yes"]]
