"""The Backend contract (turnlog/storage/backend.py), on SQLite and on PostgreSQL: the same
tests, one location per backend. What a caller may rely on whichever backend it has."""

from __future__ import annotations

import itertools

import pytest

from postgres_server import create_database, server
from turnlog import SessionSource, StoreError, Turnlog
from turnlog.storage.backend import create

_names = itertools.count()


@pytest.fixture(scope="module")
def pg():
    with server() as prefix:
        yield prefix


@pytest.fixture(params=["sqlite", "postgres"])
def location(request, tmp_path) -> tuple[str, str | None]:
    """(the location of a log that does not exist yet, the read-model file it needs or None)."""
    if request.param == "sqlite":
        return str(tmp_path / "turnlog.db"), None
    return create_database(request.getfixturevalue("pg"), f"backend_{next(_names)}"), str(tmp_path / "views.db")


def route(t: Turnlog, n: int) -> None:
    for i in range(n):
        t.get_or_create_session(SessionSource(platform="telegram", chat_type="dm", chat_id=str(i), user_id=str(i)))


def test_a_reading_open_of_a_missing_store_is_refused_and_creates_nothing(location, tmp_path):
    backend = create(*location)
    with pytest.raises(StoreError, match="no turnlog database"):
        backend.prepare(read_only=True, create_missing=False)
    assert list(tmp_path.iterdir()) == []


def test_a_writing_open_makes_the_local_file_which_is_then_writable(location):
    backend = create(*location).prepare(read_only=False, create_missing=True)
    local = backend.local_file()
    assert local in (location[0], location[1])
    assert backend.has_log() and backend.writable()
    app = backend.open_application()
    app.close()


def test_the_log_reads_back_every_event_in_position_order(location):
    with Turnlog(location[0], views=location[1]) as t:
        route(t, 5)
        log = t._projections.log
        head = log.head()
        assert head == t._app.recorder.max_notification_id() and head > 0
        rows = log.read(0, head, 1000)
        notifications = t._app.recorder.select_notifications(0, 1000, inclusive_of_start=False)
        assert [r[0] for r in rows] == [n.id for n in notifications] == sorted(r[0] for r in rows)
        assert log.count(0, head) == len(rows)
        stream = log.stream_of(rows[0])
        assert [r[0] for r in log.stream_rows([stream], head)] == [r[0] for r in rows if log.stream_of(r) == stream]


def test_a_read_only_open_reads_what_a_writer_wrote_and_writes_nothing(location):
    with Turnlog(location[0], views=location[1]) as t:
        route(t, 3)
        t.maintenance.catch_up()
    backend = create(*location).prepare(read_only=True, create_missing=False)
    assert backend.env.get("CREATE_TABLE") == "false" and backend.views_path.startswith("file:")
    with Turnlog(location[0], views=location[1], read_only=True) as reader:
        assert len(reader.sessions()) == 3 and reader.stale
