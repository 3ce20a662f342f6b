"""The lease and heartbeat times of EngineConfig, given or from their TURNLOG_* variables: a value
that is no number of seconds (text, nan, infinite) or no positive time is refused naming it, never
taken silently (a lease TTL of -1 s would expire every lease as it is taken)."""

from __future__ import annotations

import os

import pytest

from harness.cli import run
from turnlog import EngineConfig

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
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert len(result.stderr.splitlines()) == 1 and "TURNLOG_TURN_LEASE_TTL" in result.stderr
    assert os.listdir(tmp_path) == []
