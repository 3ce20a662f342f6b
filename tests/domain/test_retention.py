"""The retention rule (domain/retention.py): which sessions an archive may take, and durations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from turnlog import Retention
from turnlog.domain.retention import SessionFacts, parse_duration, position_runs, run_positions, why_archivable

NOW = datetime(2026, 6, 1, tzinfo=UTC)
LONG_AGO = NOW - timedelta(days=400)


def facts(**changes) -> SessionFacts:
    base = {"session_id": "s", "routed": False, "ended_at": LONG_AGO, "suspended": False, "last_change": LONG_AGO}
    return SessionFacts(**{**base, **changes})


@pytest.mark.parametrize("text, seconds", [("90d", 90 * 86400), ("12h", 43200), ("2w", 14 * 86400),
                                           ("1y", 365 * 86400), ("30m", 1800), ("1.5d", 129600)])
def test_durations(text, seconds):
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "90", "d", "ninety days", "-3d", "3x"])
def test_not_durations(text):
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_an_ended_session_goes_after_older_than():
    policy = Retention(older_than=timedelta(days=90), idle_for=None)
    assert why_archivable(facts(), NOW, policy) == "ended"
    assert why_archivable(facts(ended_at=NOW - timedelta(days=10), last_change=NOW), NOW, policy) is None


@pytest.mark.parametrize("kept", [{"holds_lease": True}, {"owes_delivery": True}, {"queued": True},
                                  {"archived": True}, {"routed": True, "ended_at": None}])
def test_what_never_goes(kept):
    assert why_archivable(facts(**kept), NOW, Retention()) is None


def test_a_routed_session_goes_once_it_ended_or_was_suspended():
    assert why_archivable(facts(routed=True), NOW, Retention()) == "ended"
    assert why_archivable(facts(routed=True, ended_at=None, suspended=True), NOW, Retention()) == "ended"


def test_idle_catches_a_superseded_session_older_than_does_not():
    policy = Retention(older_than=None, idle_for=timedelta(days=365))
    assert why_archivable(facts(ended_at=None), NOW, policy) == "idle"
    assert why_archivable(facts(ended_at=None, last_change=NOW - timedelta(days=30)), NOW, policy) is None


def test_both_rules_off_keeps_everything():
    assert why_archivable(facts(), NOW, Retention(older_than=None, idle_for=None)) is None


def test_a_bad_policy_is_refused():
    with pytest.raises(ValueError, match="archived_key_policy"):
        Retention(archived_key_policy="keep")
    with pytest.raises(ValueError, match="older_than"):
        Retention(older_than=timedelta(days=-1))


def test_positions_as_runs_and_back():
    assert position_runs([5, 1, 2, 3, 9, 10]) == [[1, 3], [5, 5], [9, 10]]
    assert run_positions([[1, 3], [5, 5], [9, 10]]) == [1, 2, 3, 5, 9, 10]
