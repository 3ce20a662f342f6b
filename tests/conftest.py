"""Fixtures shared by the turn tests: one log, an injected clock, and two gateways on it."""

import pytest

from turnlog import ManualClock, SequentialIds, Turnlog


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "turnlog.db")


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def t(db, clock):
    with Turnlog(db, clock=clock, session_ids=SequentialIds(), owner="gateway-a") as engine:
        yield engine


@pytest.fixture
def other(db, clock, t):
    """A second gateway process on the same log (opened after `t`)."""
    with Turnlog(db, clock=clock, session_ids=SequentialIds(), owner="gateway-b") as engine:
        yield engine
