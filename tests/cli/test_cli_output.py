"""The CLI's output layer (issue 14 item 3, issue 11 items 3 and 12): the same output options and help on
every command, control characters shown visibly in tables and exact in JSON, --db after the command,
--limit, a closed pipe, and the subcommand's usage line for a usage error found by the library."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import click
import pytest
from click.testing import Result

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog
from harness.cli import ok, run
from turnlog.cli import main

from chat import ALICE, reply_with

OUTPUT_FLAGS = {"--table", "--json", "--nl", "--csv"}
SERVERS = {"turnlog web"}  # serves pages until stopped: prints no listing to format
ESC_TEXT = "look \x1b[2J\x1b]0;pwned\x07 here"  # clear screen, set the window title, bell
BOB = SessionSource(platform="telegram", chat_id="43", user_id="43", user_name="bob")
KEY = "agent:main:telegram:dm:42"


def commands(group: click.Group, prefix: str = "turnlog"):
    ctx = click.Context(group)
    for name in sorted(group.list_commands(ctx)):
        command = group.get_command(ctx, name)
        assert command is not None
        yield f"{prefix} {name}", command
        if isinstance(command, click.Group):
            yield from commands(command, f"{prefix} {name}")


# --- every command: output options, help on every option, --db -------------------------------------------

def test_every_command_takes_the_output_options_and_has_help_on_every_option():
    walked = list(commands(main))
    assert len(walked) >= 24
    missing_help, missing_output, missing_db = [], [], []
    for name, command in [("turnlog", main), *walked]:
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden and not (param.help or "").strip():
                missing_help.append(f"{name} {param.opts[0]}")
        if command is main or isinstance(command, click.Group):
            continue
        flags = {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}
        if not OUTPUT_FLAGS <= flags and name not in SERVERS:
            missing_output.append(name)
        if "--db" not in flags:
            missing_db.append(name)
    assert missing_help == []
    assert missing_output == []
    assert missing_db == []


@pytest.fixture
def filled(tmp_path) -> str:
    db = str(tmp_path / "t.db")
    with Turnlog(db, clock=ManualClock(), session_ids=SequentialIds()) as t:
        t.handle_message(ALICE, ESC_TEXT, reply_with("reply \x1b[31mred\x1b[0m"), lambda text: None)
        t.handle_message(BOB, "hello", reply_with("hi bob"), lambda text: None)
        t.handle_message(BOB, "again", reply_with("hi again"), lambda text: None)
        t.mark_resume_pending(KEY, "boom\x07\x1b[1A")
    return db


def test_db_is_accepted_after_the_subcommand(filled):
    before = ok("--db", filled, "sessions", "--json").stdout
    after = ok("sessions", "--db", filled, "--json").stdout
    assert json.loads(after) == json.loads(before) and len(json.loads(after)) == 2


# --- control characters --------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["show", KEY], ["sessions"], ["history", KEY], ["ledger"], ["search", "look"], ["at", "#37", "transcript", "--session", "20260101_000000_00000001"],
    ["status"], ["queue", KEY], ["doctor", "--dry-run"], ["verify"], ["diff", "#1", "#37"],
])
def test_table_output_shows_control_characters_visibly(filled, args):
    result = run("--db", filled, *args)
    assert result.exit_code in (0, 1), result.output
    assert "\x1b" not in result.output and "\x07" not in result.output


def test_the_injected_text_is_shown_escaped_where_it_appears(filled):
    show = ok("--db", filled, "show", KEY).stdout
    assert "look \\x1b[2J\\x1b]0;pwned\\x07 here" in show and "reply \\x1b[31mred\\x1b[0m" in show
    sessions = ok("--db", filled, "sessions").stdout
    assert "resume_pending:boom\\x07\\x1b[1A" in sessions
    history = ok("--db", filled, "history", KEY).stdout
    assert "\\x1b[2J" in history


def test_json_keeps_the_text_exact(filled):
    data = json.loads(ok("--db", filled, "show", KEY, "--json").stdout)
    assert [m["content"] for m in data["messages"]] == [ESC_TEXT, "reply \x1b[31mred\x1b[0m"]
    nl = [json.loads(line) for line in ok("--db", filled, "show", KEY, "--nl").stdout.splitlines()]
    assert [m["content"] for m in nl] == [ESC_TEXT, "reply \x1b[31mred\x1b[0m"]


# --- --nl, --csv, --limit ------------------------------------------------------------------------------

def test_nl_prints_one_object_per_row_and_csv_a_header_and_rows(filled):
    rows = json.loads(ok("--db", filled, "ledger", "--json").stdout)
    nl = [json.loads(line) for line in ok("--db", filled, "ledger", "--nl").stdout.splitlines()]
    assert nl == rows and len(rows) == 3
    parsed = list(csv.DictReader(io.StringIO(ok("--db", filled, "ledger", "--csv").stdout)))
    assert [(r["session_id"], r["seq"], r["content"]) for r in parsed] == [
        (r["session_id"], str(r["seq"]), r["content"]) for r in rows]


def test_limit_on_sessions_history_and_ledger(filled):
    assert len(json.loads(ok("--db", filled, "sessions", "--limit", "1", "--json").stdout)) == 1
    everything = json.loads(ok("--db", filled, "history", KEY, "--json").stdout)
    limited = json.loads(ok("--db", filled, "history", KEY, "--limit", "3", "--json").stdout)
    assert limited == everything[:3] and len(everything) > 3
    assert len(json.loads(ok("--db", filled, "ledger", "--limit", "2", "--json").stdout)) == 2
    assert run("--db", filled, "ledger", "--limit", "0").exit_code == 2


HUGE = str(2**70)  # more than SQLite's INTEGER holds


def test_a_limit_or_batch_past_sqlites_integers_means_all(filled, tmp_path):
    assert len(json.loads(ok("--db", filled, "ledger", "--limit", HUGE, "--json").stdout)) == 3
    assert len(json.loads(ok("--db", filled, "sessions", "--limit", HUGE, "--json").stdout)) >= 1
    everything = json.loads(ok("--db", filled, "history", KEY, "--json").stdout)
    assert json.loads(ok("--db", filled, "history", KEY, "--limit", HUGE, "--json").stdout) == everything
    assert json.loads(ok("--db", filled, "rebuild", "--all", "--batch", HUGE, "--json").stdout)["events"] > 0
    report = json.loads(ok("--db", filled, "copy", "--to", str(tmp_path / "c.db"), "--batch", HUGE, "--json").stdout)
    assert report["copied"] == report["events"] > 0


@pytest.mark.parametrize("pause", ["nan", "inf", "1e308"])
def test_a_rebuild_pause_that_is_no_time_to_sleep_is_a_usage_error(filled, pause):
    from test_cli import assert_one_line_error
    assert_one_line_error(run("--db", filled, "rebuild", "--all", "--pause", pause), 2, "pause")


def test_the_api_refuses_a_pause_that_is_no_time_to_sleep(filled):
    from turnlog import InvalidRequest
    with Turnlog(filled) as t:
        for pause in (float("nan"), float("inf"), -1.0, 1e308, "1"):
            with pytest.raises(InvalidRequest, match="pause"):
                t.maintenance.rebuild(pause=pause)


# --- a closed pipe, usage errors -----------------------------------------------------------------------

def test_a_reader_that_goes_away_is_not_an_error(filled):
    # The reading end is closed before turnlog writes, as `turnlog sessions | head -0` would.
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "TURNLOG_DB": filled}
    env.pop("TURNLOG_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "turnlog", "sessions"], stdout=write_end,
                          stderr=subprocess.PIPE, env=env, timeout=120)
    os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""


def test_head_on_a_long_listing_exits_quietly(tmp_path):
    db = str(tmp_path / "many.db")
    with Turnlog(db, clock=ManualClock(), session_ids=SequentialIds()) as t:
        for n in range(1500):  # well over a pipe buffer of table lines
            t.get_or_create_session(SessionSource(platform="telegram", chat_id=str(n), user_id=str(n)))
    env = {**os.environ, "TURNLOG_DB": db}
    env.pop("TURNLOG_DEBUG", None)
    proc = subprocess.run(f"{sys.executable} -m turnlog sessions | head -1; echo \"status=${{PIPESTATUS[0]}}\"",
                          shell=True, executable="/bin/bash", capture_output=True, env=env, timeout=300)
    lines = proc.stdout.decode().splitlines()
    assert lines[0].startswith("session_id") and lines[-1] == "status=0", proc.stdout
    assert proc.stderr == b""


def test_a_usage_error_found_by_the_library_prints_the_subcommands_usage(filled):
    result = run("--db", filled, "rebuild", "no_such_projection")
    assert result.exit_code == 2
    assert "Usage: main rebuild [OPTIONS] [NAMES]..." in result.output or \
        "Usage: turnlog rebuild [OPTIONS] [NAMES]..." in result.output
    assert "unknown projection 'no_such_projection'" in result.output
