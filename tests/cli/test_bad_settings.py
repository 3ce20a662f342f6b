"""Every TURNLOG_* variable that takes a value, given one it does not take: refused by one error
type, InvalidSetting, naming the variable and what it takes, before a database is made; at the
command line one line, exit 2 (a usage mistake, but not of the command line: no usage block)."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest

import turnlog
from harness.cli import run
from turnlog import EngineConfig, InvalidSetting, Turnlog
from turnlog.logs import configure

# Each variable and values it does not take (other digits: the project reads ASCII digits only).
BAD = {
    "TURNLOG_ENCRYPTION": ["maybe"],
    "TURNLOG_COMPACT_EVENTS": ["2"],
    "TURNLOG_GROUP_COMMIT": ["sometimes"],
    "TURNLOG_TURN_LEASE_TTL": ["abc", "٣٠", "0", "-1"],
    "TURNLOG_TURN_LEASE_TIMEOUT": ["abc", "３０", "-1", "nan"],
    "TURNLOG_HEARTBEAT_TTL": ["abc", "٣٠", "inf"],
    "TURNLOG_AUTO_CONTINUE_FRESHNESS": ["soon", "٣٠"],
    "TURNLOG_SQLITE_LOCK_TIMEOUT": ["abc", "٣٠", "2.5"],
    "TURNLOG_SQLITE_SYNCHRONOUS": ["sometimes"],
    "TURNLOG_WAL_CHECKPOINT": ["sometimes"],
    "TURNLOG_MASTER_KEY": ["not a key", "c2hvcnQ="],
}
# Read by logs.configure only, which the command line does not call (tested below).
BAD_FOR_CONFIGURE = {"TURNLOG_LOG_JSON": ["json"]}
# Taken as given: a path, a token, "set or not".
FREE_FORM = {"TURNLOG_DB", "TURNLOG_VIEWS", "TURNLOG_WEB_TOKEN", "TURNLOG_DEBUG"}
CASES = [(name, value) for name, values in sorted(BAD.items()) for value in values]
ROUTE = ["route", "--platform", "telegram", "--chat-id", "1", "--user-id", "1"]


@pytest.fixture(autouse=True)
def no_turnlog_settings(monkeypatch):
    for name in list(os.environ):
        if name.startswith("TURNLOG_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("name, value", CASES)
def test_the_command_line_says_a_bad_setting_in_one_line_exit_2_and_makes_no_database(
        tmp_path, monkeypatch, name, value):
    monkeypatch.setenv(name, value)

    result = run("--db", str(tmp_path / "new.db"), *ROUTE)

    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"Error: {name}") and ": give " in line, line
    assert "Usage:" not in result.stderr and "ValueError" not in line and "Traceback" not in result.output
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name, value", CASES)
def test_the_python_api_raises_invalid_setting_naming_the_variable_before_a_database_is_made(
        tmp_path, monkeypatch, name, value):
    monkeypatch.setenv(name, value)

    with pytest.raises(InvalidSetting, match=name):
        Turnlog(str(tmp_path / "new.db"))

    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["TURNLOG_TURN_LEASE_TTL", "TURNLOG_TURN_LEASE_TIMEOUT", "TURNLOG_HEARTBEAT_TTL",
                                  "TURNLOG_AUTO_CONTINUE_FRESHNESS"])
def test_an_engine_config_refuses_other_digits_in_its_seconds(monkeypatch, name):
    monkeypatch.setenv(name, "٣٠")
    with pytest.raises(InvalidSetting, match=f"{name}='٣٠' is not a number of seconds: give a number in ASCII"):
        EngineConfig()


def test_the_settings_are_taken_in_ascii_digits_and_any_case(tmp_path, monkeypatch):
    for name, value in [("TURNLOG_TURN_LEASE_TTL", " 45 "), ("TURNLOG_AUTO_CONTINUE_FRESHNESS", "-1"),
                        ("TURNLOG_SQLITE_LOCK_TIMEOUT", "5"), ("TURNLOG_SQLITE_SYNCHRONOUS", "full"),
                        ("TURNLOG_WAL_CHECKPOINT", "Inline"), ("TURNLOG_ENCRYPTION", "Off")]:
        monkeypatch.setenv(name, value)
    config = EngineConfig()
    assert (config.lease_ttl_s, config.freshness_window_s) == (45.0, -1.0)
    assert run("--db", str(tmp_path / "new.db"), *ROUTE).exit_code == 0


def test_the_json_log_variable_is_an_invalid_setting_when_configure_reads_it(monkeypatch):
    for name, values in BAD_FOR_CONFIGURE.items():
        monkeypatch.setenv(name, values[0])
        with pytest.raises(InvalidSetting, match=name):
            configure(stream=io.StringIO())


def test_every_turnlog_variable_the_code_reads_is_walked_here():
    package = Path(turnlog.__file__).parent
    named = {name for path in package.rglob("*.py")
             for name in re.findall(r"\bTURNLOG_[A-Z_]+[A-Z]\b", path.read_text())}
    named -= {"TURNLOG_NAMESPACE"}  # a uuid namespace, not a variable
    assert named == set(BAD) | set(BAD_FOR_CONFIGURE) | FREE_FORM
