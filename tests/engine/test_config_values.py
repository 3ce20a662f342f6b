"""The lease and heartbeat times of EngineConfig, given or from their TURNLOG_* variables: a value
that is no number of seconds (text, nan, infinite) or no positive time is refused naming it, never
taken silently (a lease TTL of -1 s would expire every lease as it is taken)."""

from __future__ import annotations

import io
import os

import pytest

from harness.cli import run
from turnlog import EngineConfig, InvalidRequest, Turnlog
from turnlog.domain.env_flags import env_flag
from turnlog.logs import configure

VARIABLES = {"TURNLOG_TURN_LEASE_TTL": "lease_ttl_s", "TURNLOG_TURN_LEASE_TIMEOUT": "lease_timeout_s",
             "TURNLOG_HEARTBEAT_TTL": "heartbeat_ttl_s"}


@pytest.mark.parametrize("variable", sorted(VARIABLES))
@pytest.mark.parametrize("value", ["abc", "nan", "inf", "-1"])
def test_a_bad_time_in_the_environment_is_refused_naming_the_variable(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=variable):
        EngineConfig()


@pytest.mark.parametrize("field", sorted(VARIABLES.values()))
@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf"), "30"])
def test_a_bad_time_given_is_refused_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        EngineConfig(**{field: value})


def test_the_ttls_must_be_more_than_nothing_a_lease_timeout_may_be_nothing():
    for field in ("lease_ttl_s", "heartbeat_ttl_s"):
        with pytest.raises(ValueError, match=field):
            EngineConfig(**{field: 0})
    assert EngineConfig(lease_timeout_s=0).lease_timeout_s == 0


def test_the_command_line_says_which_variable_and_makes_no_database(tmp_path, monkeypatch):
    monkeypatch.setenv("TURNLOG_TURN_LEASE_TTL", "thirty")
    result = run("--db", str(tmp_path / "new.db"), "route", "--platform", "telegram", "--chat-id", "1")
    assert result.exit_code == 2 and "Traceback" not in result.output  # a bad setting: a usage mistake
    assert len(result.stderr.splitlines()) == 1 and "TURNLOG_TURN_LEASE_TTL" in result.stderr
    assert os.listdir(tmp_path) == []


FLAGS = ["TURNLOG_COMPACT_EVENTS", "TURNLOG_GROUP_COMMIT", "TURNLOG_ENCRYPTION"]


@pytest.mark.parametrize("variable", FLAGS)
@pytest.mark.parametrize("value", ["maybe", "2", "nein", "tru", "on!"])
def test_a_yes_no_variable_with_another_value_is_refused_naming_it_and_makes_no_database(
        tmp_path, monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(InvalidRequest) as e:
        Turnlog(str(tmp_path / "new.db"))
    message = str(e.value)
    assert variable in message and repr(value) in message and "\n" not in message
    assert all(word in message for word in ("1/0", "true/false", "yes/no", "on/off"))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("variable", FLAGS)
@pytest.mark.parametrize("value, on", [("1", True), ("TRUE", True), ("Yes", True), ("on", True), (" on ", True),
                                       ("0", False), ("False", False), ("NO", False), ("off", False)])
def test_a_yes_no_variable_takes_each_spelling_in_any_case(monkeypatch, variable, value, on):
    monkeypatch.setenv(variable, value)
    assert env_flag(variable) is on


def test_the_json_log_variable_is_refused_when_configure_reads_it(monkeypatch):
    monkeypatch.setenv("TURNLOG_LOG_JSON", "json")
    with pytest.raises(InvalidRequest, match="TURNLOG_LOG_JSON='json'"):
        configure(stream=io.StringIO())


def test_the_command_line_says_which_yes_no_variable_and_makes_no_database(tmp_path, monkeypatch):
    monkeypatch.setenv("TURNLOG_GROUP_COMMIT", "sometimes")
    result = run("--db", str(tmp_path / "new.db"), "route", "--platform", "telegram", "--chat-id", "1")
    assert result.exit_code == 2 and "Traceback" not in result.output  # InvalidSetting: a usage mistake
    [error] = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert "TURNLOG_GROUP_COMMIT='sometimes'" in error
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("field, value", [
    ("lease_ttl_s", -1.0), ("lease_timeout_s", "30"), ("heartbeat_ttl_s", 0), ("dedup_window_s", -5),
    ("dedup_window_s", {"telegram": True}), ("delivery_max_attempts", 0), ("unknown_send_policy", {"telegram": "maybe"}),
    ("compression_mode", "zip"), ("retention", 30), ("erasure_check_s", -1), ("erasure_check_s", True),
    ("erasure_check_s", float("nan")), ("gc_mode", "never"), ("summariser", "not callable"),
])
def test_every_bad_field_is_a_turnlog_error_naming_it(field, value):
    """Refused as InvalidRequest (still a ValueError), so a caller catching TurnlogError sees it."""
    with pytest.raises(InvalidRequest, match=field):
        EngineConfig(**{field: value})
