"""`turnlog compact SESSION [--keep N] [--focus TEXT] [--summary-file F]` at the command line."""

import json
import re

from click.testing import CliRunner

from turnlog import ManualClock, SequentialIds, Turnlog
from turnlog.cli import main

from chat import alice, echo

KEY = "agent:main:telegram:dm:42"


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def chat(db: str, turns: int = 3) -> str:
    with Turnlog(db, clock=ManualClock(), session_ids=SequentialIds()) as t:
        for i in range(turns):
            t.handle_message(alice(f"m{i}"), f"question {i}", echo, lambda text: None)
        return t.session(alice()).session_id


def test_compact_records_the_operators_summary_and_keeps_the_last_turns(tmp_path):
    db = str(tmp_path / "c.db")
    session_id = chat(db)
    summary = tmp_path / "summary.txt"
    summary.write_text("Alice asked three questions; all answered.\n", encoding="utf-8")

    result = invoke("--db", db, "compact", session_id, "--keep", "1", "--focus", "questions",
                    "--summary-file", str(summary), "--json")

    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {k: data[k] for k in ("session_id", "from_seq", "upto_seq", "messages_compacted", "history_before",
                                 "history_after", "kept_turns", "focus", "model")} == {
        "session_id": session_id, "from_seq": 1, "upto_seq": 4, "messages_compacted": 4, "history_before": 6,
        "history_after": 3, "kept_turns": 1, "focus": "questions", "model": None}
    assert data["summary_chars"] == len("Alice asked three questions; all answered.\n")
    with Turnlog(db) as t:
        assert [m.content for m in t.turns.agent_history(session_id)] == [
            "Alice asked three questions; all answered.\n", "question 2", "re: question 2"]
        [event] = [e for e in t.history(session_id) if e.event == "TranscriptCompacted"]
        assert (event.actor, event.cause) == ("cli", "compact")


def test_compact_by_key_without_a_file_records_the_fallback_summary(tmp_path):
    db = str(tmp_path / "c.db")
    session_id = chat(db, 2)

    result = invoke("--db", db, "compact", KEY)

    assert result.exit_code == 0, result.output
    assert re.fullmatch(rf"compacted {session_id}: seqs 1\.\.4, 4 messages -> a summary of \d+ characters;"
                        r" the history holds 1 messages \(was 4\)\n", result.output), result.output
    with Turnlog(db) as t:
        [summary] = t.turns.agent_history(session_id)
        assert summary.content.startswith("[CONTEXT COMPACTION — REFERENCE ONLY]")


def test_errors_are_one_line_with_the_right_exit_code(tmp_path):
    db = str(tmp_path / "c.db")
    session_id = chat(db, 2)
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")

    unknown = invoke("--db", db, "compact", "20990101_000000_nosuch")
    assert (unknown.exit_code, unknown.output) == (1, "Error: no routing key or session '20990101_000000_nosuch'\n")
    bad = invoke("--db", db, "compact", session_id, "--keep", "-1")
    assert bad.exit_code == 2 and "Invalid value for '--keep'" in bad.output
    too_many = invoke("--db", db, "compact", session_id, "--keep", "5")
    assert (too_many.exit_code, too_many.output) == (
        1, "Error: nothing to compact: the history holds 2 turn(s), 5 to keep\n")
    blank = invoke("--db", db, "compact", session_id, "--summary-file", str(empty))
    assert blank.exit_code == 2 and "a summary must not be empty" in blank.output
    missing = invoke("--db", db, "compact", session_id, "--summary-file", str(tmp_path / "nope.txt"))
    assert missing.exit_code == 2
    for result in (unknown, bad, too_many, blank, missing):
        assert "Traceback" not in result.output


def test_compact_is_refused_while_a_turn_holds_the_lease(tmp_path):
    db = str(tmp_path / "c.db")
    session_id = chat(db, 2)
    with Turnlog(db) as t:
        token = t.turns.acquire_lease(session_id, KEY)
        result = invoke("--db", db, "compact", session_id)
        assert result.exit_code == 1 and result.output.startswith("Error: a turn holds session")
        assert len(result.output.splitlines()) == 1
        t.turns.release_lease(token)
    assert invoke("--db", db, "compact", session_id).exit_code == 0


def test_diff_across_a_compaction_names_it(tmp_path):
    db = str(tmp_path / "c.db")
    session_id = chat(db, 2)
    with Turnlog(db) as t:
        before = t.maintenance.log_head()
    assert invoke("--db", db, "compact", session_id, "--focus", "names").exit_code == 0
    after = f"#{before + 3}"

    result = invoke("--db", db, "diff", f"#{before}", after, "--json")

    assert result.exit_code == 0, result.output
    [edit] = json.loads(result.output)["sessions"][session_id]["history_edits"]
    assert (edit["edit"], edit["from_seq"], edit["upto_seq"], edit["focus"]) == ("compacted", 1, 4, "names")
    assert "history_edits: " in invoke("--db", db, "diff", f"#{before}", after).output
