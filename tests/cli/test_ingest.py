"""`turnlog ingest`: JSONL gateway traffic replayed through the engine, bad lines reported and skipped."""

import json
import sqlite3

from click.testing import CliRunner

from turnlog import Turnlog
from turnlog.cli import main

DM = {"platform": "telegram", "chat_type": "dm", "chat_id": "1", "user_id": "1"}


def line(**record):
    return json.dumps(record)


def test_ingest_runs_turns_and_commands_and_skips_bad_lines_with_their_numbers(tmp_path):
    db = str(tmp_path / "i.db")
    traffic = tmp_path / "traffic.jsonl"
    traffic.write_text("\n".join([
        line(op="message", source=DM, text="hi", message_id="a1", at="2026-11-01T10:00:00Z", reply="hello!"),
        "not json",
        line(op="message", source={**DM, "platform": "nope"}, text="x"),
        line(op="command", source=DM, text="/new", at="2026-11-01T10:01:00Z"),
        line(op="message", source=DM, text="again", message_id="a2", at="2026-11-01T10:05:00Z"),
        line(op="command", source=DM, text="/dance"),
        "",
    ]) + "\n")

    result = CliRunner().invoke(main, ["--db", db, "ingest", str(traffic), "--json"])

    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert (report["applied"], report["turns"], report["commands"], report["queued"]) == (3, 1, 1, 1)
    assert [e["line"] for e in report["errors"]] == [2, 3, 6]
    assert "line 3: bad source: unknown platform 'nope'" in result.stderr
    assert "Traceback" not in result.output
    with Turnlog(db) as t:
        ended, = [s for s in t.sessions() if s.end_reason == "session_reset"]
        assert ended.created_at == "2026-11-01T10:00:00+00:00"  # "at" set the clock
        assert [m["content"] for m in t.transcript(ended.session_id)] == ["hi", "hello!"]
        assert [d.state for d in t.ledger()] == ["delivered"]
        waiting = t.queue("agent:main:telegram:dm:1")
        assert [(q.text, q.state) for q in waiting] == [("again", "pending")]  # no reply: stays queued


def test_ingest_from_stdin_with_every_line_good_exits_zero(tmp_path):
    db = str(tmp_path / "i.db")
    stdin = line(op="message", source=DM, text="hi", message_id="a1", reply="yo") + "\n"

    result = CliRunner().invoke(main, ["--db", db, "ingest", "-"], input=stdin)

    assert result.exit_code == 0, result.output
    assert "1 records applied (1 turns, 0 commands, 0 queued), 0 duplicates, 0 failed" in result.output


def test_a_failing_line_leaves_nothing_of_itself_in_the_log(tmp_path):
    good = line(op="message", source=DM, text="hi", message_id="g1", reply="yo")
    bad = line(op="message", source=DM, text="hi", at="yesterday", reply="x")
    (tmp_path / "good.jsonl").write_text(good + "\n")
    (tmp_path / "both.jsonl").write_text(good + "\n" + bad + "\n")

    alone = CliRunner().invoke(main, ["--db", str(tmp_path / "good.db"), "ingest", str(tmp_path / "good.jsonl")])
    result = CliRunner().invoke(main, ["--db", str(tmp_path / "both.db"), "ingest", str(tmp_path / "both.jsonl")])

    assert alone.exit_code == 0, alone.output
    assert result.exit_code == 1
    assert "line 2: at is not an ISO time" in result.stderr

    def topics(db):
        return sorted(row[0] for row in sqlite3.connect(tmp_path / db).execute("SELECT topic FROM stored_events"))
    assert topics("both.db") == topics("good.db")  # the good line's events and the replay's boot, nothing of the bad one


def test_an_ingest_that_applies_nothing_records_nothing(tmp_path):
    db = str(tmp_path / "i.db")
    Turnlog(db).close()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(line(op="message", source=DM, text="hi", at="yesterday", reply="x") + "\n\n")

    result = CliRunner().invoke(main, ["--db", db, "ingest", str(bad)])

    assert result.exit_code == 1 and "line 1: at is not an ISO time" in result.stderr
    with Turnlog(db) as t:
        assert t.maintenance.log_head() == 0  # not even the replay's boot


def test_ids_of_the_wrong_type_or_with_control_characters_are_refused_with_their_reason(tmp_path):
    db = str(tmp_path / "i.db")
    traffic = tmp_path / "traffic.jsonl"
    traffic.write_text("\n".join([
        line(op="message", source={**DM, "chat_id": True}, text="x", reply="y"),
        line(op="message", source={**DM, "chat_id": 1.5}, text="x", reply="y"),
        line(op="message", source={**DM, "user_id": [1]}, text="x", reply="y"),
        line(op="message", source=DM, text="x", reply="y", message_id="a\u0000b"),
        line(op="message", source={**DM, "chat_id": 42}, text="numeric ids are ids", reply="y", message_id=7),
    ]) + "\n")

    result = CliRunner().invoke(main, ["--db", db, "ingest", str(traffic)])

    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "line 1: bad source: chat_id must be a string or an integer, not True",
        "line 2: bad source: chat_id must be a string or an integer, not 1.5",
        "line 3: bad source: user_id must be a string or an integer, not [1]",
        "line 4: message_id holds a control character: 'a\\x00b'",
    ]
    with Turnlog(db) as t:
        assert [s.session_key for s in t.sessions()] == ["agent:main:telegram:dm:42"]


def test_a_source_without_a_platform_or_chat_id_names_the_field_it_lacks(tmp_path):
    db = str(tmp_path / "i.db")
    traffic = tmp_path / "traffic.jsonl"
    no_chat = {k: v for k, v in DM.items() if k != "chat_id"}
    no_platform = {k: v for k, v in DM.items() if k != "platform"}
    traffic.write_text("\n".join([
        line(op="message", source=no_chat, text="x", reply="y"),
        line(op="message", source=no_platform, text="x", reply="y"),
    ]) + "\n")

    result = CliRunner().invoke(main, ["--db", db, "ingest", str(traffic)])

    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "line 1: bad source: it has no chat_id",
        "line 2: bad source: it has no platform",
    ]


def test_a_misspelt_or_unknown_field_is_refused_naming_it_not_dropped_in_silence(tmp_path):
    db = str(tmp_path / "i.db")
    traffic = tmp_path / "traffic.jsonl"
    traffic.write_text("\n".join([
        line(op="message", source=DM, text="hi", message_id="a1", rpely="hello!"),
        line(op="message", source={**DM, "chatid": "2"}, text="hi", message_id="a2", reply="yo"),
        line(op="message", source={**DM, "role_authorized": True}, text="hi", message_id="a3", reply="yo"),
        line(op="message", source=DM, text="fine", message_id="a4", reply="yo"),
    ]) + "\n")

    result = CliRunner().invoke(main, ["--db", db, "ingest", str(traffic), "--json"])

    assert result.exit_code == 1
    errors = [e["error"] for e in json.loads(result.stdout)["errors"]]
    assert errors[0].startswith("unknown field 'rpely' (known: at, message_id, op, reply, source, text)")
    assert errors[1].startswith("unknown source field 'chatid' (known: account_id, auto_thread_created,")
    assert errors[2].startswith("unknown source field 'role_authorized'")  # a trust flag is never read from input
    assert len(errors) == 3
    with Turnlog(db) as t:
        assert [m["content"] for s in t.sessions() for m in t.transcript(s.session_id)] == ["fine", "yo"]
        assert t.queue("agent:main:telegram:dm:1") == []  # the misspelt reply's message was not queued either


def test_a_field_given_twice_is_refused_naming_it(tmp_path):
    db = str(tmp_path / "i.db")
    source = json.dumps(DM)[:-1] + ', "chat_id": "2"}'
    traffic = tmp_path / "traffic.jsonl"
    traffic.write_text("\n".join([
        '{"op": "message", "op": "command", "source": %s, "text": "/new"}' % json.dumps(DM),
        '{"op": "message", "source": %s, "text": "hi", "reply": "yo"}' % source,
    ]) + "\n")

    result = CliRunner().invoke(main, ["--db", db, "ingest", str(traffic)])

    assert result.exit_code == 1
    assert result.stderr.splitlines() == ["line 1: field 'op' is given twice", "line 2: field 'chat_id' is given twice"]
    with Turnlog(db) as t:
        assert t.sessions() == []


def test_a_byte_order_mark_at_the_start_of_the_file_is_ignored(tmp_path):
    db = str(tmp_path / "i.db")
    traffic = tmp_path / "traffic.jsonl"
    record = line(op="message", source=DM, text="hi", message_id="a1", reply="yo")
    traffic.write_bytes(("\ufeff" + record + "\r\n" + "\ufeff" + record.replace("a1", "a2") + "\r\n").encode())

    result = CliRunner().invoke(main, ["--db", db, "ingest", str(traffic), "--json"])

    report = json.loads(result.stdout)
    assert report["applied"] == 1
    assert [(e["line"], e["error"][:9]) for e in report["errors"]] == [(2, "not JSON ")]  # only the file's start
