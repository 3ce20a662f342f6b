"""Fixtures shared by every test: one log, an injected clock, gateways on it, and a factory.

`make_turnlog(**options)` opens an engine on the test's log (the test's clock and deterministic
session ids unless given) and closes it at the end; called again with another `owner`, it is a
second gateway process on the same log. tests/contract/ runs the same factory on every backend.
"""

from __future__ import annotations

import socket
from typing import Any, Callable, Iterator

import pytest

from turnlog import ManualClock, SequentialIds, Turnlog

from chat import ALICE, BOB


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files marked `takes_seconds(n)` first, longest first, then the rest by how many tests they
    hold, most first.

    scripts/test hands whole files to the workers in this order (`--no-loadscope-reorder`). In
    xdist's own order (by test count) a file of one test that runs for minutes is queued last, and
    runs alone at the end while the other worker sits idle."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def order(group: list[pytest.Item]) -> tuple[float, int]:
        long = group[0].get_closest_marker("takes_seconds")
        return (-long.args[0] if long is not None else 0.0, -len(group))

    items[:] = [item for group in sorted(files.values(), key=order) for item in group]


@pytest.fixture(autouse=True)
def shared_sources_stay_as_they_are() -> Iterator[None]:
    """ALICE and BOB are shared by every module: a test that changed one would change the next
    module's tests (a source is mutable); copy it instead (`dataclasses.replace`)."""
    before = (ALICE.to_dict(), BOB.to_dict())
    yield
    assert (ALICE.to_dict(), BOB.to_dict()) == before, "a test changed tests/chat.py's ALICE or BOB: copy it first"


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "turnlog.db")


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def make_turnlog(db, clock) -> Iterator[Callable[..., Turnlog]]:
    opened: list[Turnlog] = []

    def make(**options: Any) -> Turnlog:
        options.setdefault("clock", clock)
        options.setdefault("session_ids", SequentialIds())
        engine = Turnlog(db, **options)
        opened.append(engine)
        return engine

    yield make
    for engine in reversed(opened):
        engine.close()


@pytest.fixture
def t(make_turnlog):
    return make_turnlog(owner="gateway-a")


@pytest.fixture
def other(make_turnlog, t):
    """A second gateway process on the same log (opened after `t`)."""
    return make_turnlog(owner="gateway-b")


@pytest.fixture
def on_another_host(monkeypatch) -> None:
    """This test's engine runs as if on another host than the one a stored log was written on:
    an old fixture's boots are judged by their heartbeats' expiry (the injected clock), not by
    whether a process of theirs happens to have a live pid here (pids are reused)."""
    monkeypatch.setattr(socket, "gethostname", lambda: "another-host")
