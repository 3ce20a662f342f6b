"""A hostile user at the command line: conflicting flags, unknown names, a full disk, missing
folders, Ctrl-C. Each answer is one line, no traceback; exit 2 for a usage mistake, 1 for a
runtime failure, 130 for an interrupt."""

from __future__ import annotations

import json

import click

from turnlog.cli import main
from harness.cli import run
from chat import collect, echo


def leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()):
    ctx = click.Context(group)
    for name in sorted(group.list_commands(ctx)):
        command = group.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            yield from leaf_commands(command, (*prefix, name))
        else:
            yield (*prefix, name), command


def assert_usage_error(result, *mentions: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output and result.stdout == ""
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(error_lines) == 1, result.stderr
    for text in mentions:
        assert text in error_lines[0], error_lines[0]


# -- 2: --json with --csv ---------------------------------------------------------------------

def test_json_and_csv_together_are_a_usage_error_naming_both_on_every_command(tmp_path):
    db = str(tmp_path / "never.db")
    checked = []
    for names, command in leaf_commands(main):
        flags = {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}
        if not {"--json", "--csv"} <= flags:
            continue
        for order in (["--json", "--csv"], ["--csv", "--json"]):
            result = run("--db", db, *names, *order)
            assert_usage_error(result, "--json", "--csv")
        checked.append(names)
    assert len(checked) >= 24
    assert not (tmp_path / "never.db").exists()


def test_the_same_format_flag_twice_is_no_conflict(tmp_path):
    result = run("key", "--platform", "telegram", "--chat-id", "42", "--json", "--json")
    assert result.exit_code == 0, result.output


# -- 3: output to a full device ----------------------------------------------------------------

def test_output_to_a_full_device_is_one_line_and_exit_1():
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNLOG_")}
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "turnlog", "key", "--platform", "telegram", "--chat-id", "42"],
                              stdout=full, stderr=subprocess.PIPE, env=env, timeout=120,
                              cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.decode() == "turnlog: cannot write output: No space left on device\n"


# -- 1: Ctrl-C --------------------------------------------------------------------------------

def test_ctrl_c_during_an_ingest_exits_130_with_one_line_and_keeps_what_was_accepted(tmp_path):
    import json
    import os
    import signal
    import subprocess
    import sys

    from turnlog import Turnlog

    db = str(tmp_path / "t.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNLOG_")}
    record = {"op": "message", "source": {"platform": "telegram", "chat_type": "dm", "chat_id": "42", "user_id": "42"},
              "text": "hi", "message_id": "a1", "at": "2026-11-01T10:00:00Z", "reply": "hello!"}
    proc = subprocess.Popen([sys.executable, "-m", "turnlog", "--db", db, "ingest", "-", "--progress-every", "1"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    try:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.write((json.dumps(record) + "\n").encode())
        proc.stdin.flush()
        progress = proc.stderr.readline().decode()  # the line is applied: the ingest now waits on stdin
        assert progress.startswith("ingest: 1 lines, 1 applied"), progress
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert proc.returncode == 130, err
    assert err.decode() == "turnlog: interrupted\n"
    with Turnlog(db) as t:
        [session] = t.sessions()
        assert [m["content"] for m in t.transcript(session.session_id)] == ["hi", "hello!"]


# -- 4: an unknown event name -----------------------------------------------------------------

def test_history_of_an_unknown_event_type_is_a_usage_error_naming_it(tmp_path):
    db = str(tmp_path / "t.db")
    from turnlog import SessionSource, Turnlog

    with Turnlog(db) as t:
        t.handle_message(SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42"), "hi",
                         echo, collect([]))
        [session] = t.sessions()
    result = run("--db", db, "history", session.session_id, "--type", "Bogus")
    assert_usage_error(result, "'Bogus'", "RouteBound")
    known = run("--db", db, "history", session.session_id, "--type", "MessageAppended", "--json")
    assert known.exit_code == 0, known.output
    assert len(json.loads(known.stdout)) == 2


# -- numbers in other digits ------------------------------------------------------------------

def test_every_number_option_takes_ascii_digits_only(tmp_path):
    db = str(tmp_path / "never.db")
    checked = []
    for names, command in leaf_commands(main):
        for param in command.params:
            if not isinstance(param, click.Option) or param.is_flag or param.count:
                continue
            if not isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType)):
                continue
            result = run("--db", db, *names, param.opts[0], "٨٠")
            assert result.exit_code == 2, (names, param.opts, result.output)
            assert "'٨٠' is not a number in ASCII digits" in result.stderr, (names, result.stderr)
            checked.append((names, param.opts[0]))
    assert (("web",), "--port") in checked and len(checked) >= 15, checked
    assert not (tmp_path / "never.db").exists()


# -- 5: a failed import-hermes makes no database ----------------------------------------------

def test_an_import_of_what_is_no_hermes_home_makes_no_database(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    db = tmp_path / "new.db"
    missing = run("--db", str(db), "import-hermes", str(home))
    assert missing.exit_code == 2 and "no state.db" in missing.stderr, missing.output
    (home / "state.db").write_bytes(b"not a database at all" * 100)
    garbage = run("--db", str(db), "import-hermes", str(home))
    assert garbage.exit_code == 1 and "not a readable SQLite database" in garbage.stderr, garbage.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
