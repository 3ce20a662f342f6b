"""A copy between backends SIGKILLed midway, then run again: it goes on from the target's head and
finishes with every event once, the target's chain verifying (real processes, tests/harness)."""

from __future__ import annotations

import base64
import itertools

import pytest

from harness import procs
from postgres_server import create_database, server
from turnlog import Turnlog

from chat import BOB, alice, collect, echo

_names = itertools.count()

# Kills itself right after the third batch committed: between two write transactions.
BETWEEN_BATCHES = """
t = kit.turnlog()
calls = []
def progress(done, total):
    calls.append(done)
    if len(calls) == 3:
        kit.kill_self()
t.copy_to(kit.work / "target-location", views=None, batch=20, progress=progress)
"""

# Tells the parent it is under way and goes on copying: the kill lands wherever the copy is.
ANYWHERE = """
t = kit.turnlog()
def progress(done, total):
    if done >= 40:
        kit.ready()
t.copy_to(kit.work / "target-location", views=None, batch=10, progress=progress)
"""


@pytest.fixture(autouse=True)
def master_key(monkeypatch):
    """One master key for the encrypted source and its copy (a PostgreSQL log keeps no key file),
    the killed child's too: it inherits the environment."""
    monkeypatch.setenv("TURNLOG_MASTER_KEY", base64.b64encode(bytes(range(32))).decode())


@pytest.fixture(scope="module")
def pg():
    with server() as prefix:
        yield prefix


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request, tmp_path) -> tuple[str, str | None]:
    if request.param == "sqlite":
        return str(tmp_path / "copy.db"), None
    url = create_database(request.getfixturevalue("pg"), f"killed_copy_{next(_names)}")
    return url, str(tmp_path / "copy-views.db")


def child_code(code: str, location: str, views: str | None) -> str:
    return code.replace('kit.work / "target-location", views=None', f"{location!r}, views={views!r}")


def talk(t: Turnlog, turns: int) -> None:
    sent: list[str] = []
    for i in range(turns):
        t.handle_message(alice(f"a{i}"), f"hello {i}", echo, collect(sent))
        t.handle_message(BOB, f"bob {i}", echo, collect(sent))


@pytest.mark.parametrize("code", [BETWEEN_BATCHES, ANYWHERE], ids=["between-batches", "anywhere"])
def test_a_copy_killed_midway_finishes_on_a_second_run_without_duplicates(tmp_path, target, code):
    location, views = target
    source = tmp_path / "source.db"
    with Turnlog(source) as t:
        talk(t, 6)
        head = t.maintenance.log_head()
        before = {s.session_id: t.export(s.session_id) for s in t.sessions()}
    assert head > 100  # several batches to copy
    procs.crash(source, child_code(code, location, views), work=tmp_path)
    with Turnlog(source) as t:
        report = t.copy_to(location, views=views)
    assert report.events == report.head == head  # each event once: compared one by one with the source
    assert report.resumed_from + report.copied == head
    if code is BETWEEN_BATCHES:
        assert report.resumed_from == 60  # three batches of 20 were committed before the kill
    with Turnlog(location, views=views) as copy:
        assert copy.maintenance.verify_chain().breaks == []
        assert {s.session_id: copy.export(s.session_id) for s in copy.sessions()} == before
        assert len(copy.events_around(1, before=0, after=10_000)) == head


def test_a_copy_from_postgresql_killed_midway_finishes_on_a_second_run(tmp_path, pg):
    source = create_database(pg, f"killed_source_{next(_names)}")
    views = str(tmp_path / "source-views.db")
    with Turnlog(source, views=views) as t:
        talk(t, 6)
        before = {s.session_id: t.export(s.session_id) for s in t.sessions()}
        head = t.maintenance.log_head()
    target = str(tmp_path / "copy.db")
    procs.crash(source, child_code(BETWEEN_BATCHES, target, None), work=tmp_path, views=str(tmp_path / "child"))
    with Turnlog(source, views=views) as t:
        report = t.copy_to(target)
    assert report.resumed_from > 0 and report.head == head
    with Turnlog(target) as copy:
        assert copy.maintenance.verify_chain().breaks == []
        assert {s.session_id: copy.export(s.session_id) for s in copy.sessions()} == before
