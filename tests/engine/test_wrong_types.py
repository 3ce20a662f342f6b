"""Public methods given a value of the wrong type (None, an int where text goes, one name where a
list goes) raise InvalidRequest naming the argument, never an AttributeError or TypeError from
deep inside, and record nothing."""

from __future__ import annotations

import os

import pytest

from turnlog import InvalidRequest

from chat import alice


@pytest.fixture
def sid(t) -> str:
    return t.get_or_create_session(alice()).session_id


def head(t) -> int:
    return t.maintenance.projection_status()[0].position


@pytest.mark.parametrize("text", [None, 5, b"/new"])
def test_a_command_that_is_not_a_string(t, sid, text):
    before = head(t)
    with pytest.raises(InvalidRequest, match="command"):
        t.command(alice(), text)
    assert head(t) == before and t.session(alice()).session_id == sid


@pytest.mark.parametrize("text", [5, b"title", ["a"]])
def test_a_title_that_is_not_a_string(t, sid, text):
    with pytest.raises(InvalidRequest, match="title"):
        t.set_title(sid, text)
    assert t.title(sid) is None


@pytest.mark.parametrize("options, mentions", [
    ({"older_than": 5}, "older_than"),
    ({"idle_for": ["90d"]}, "idle_for"),
])
def test_an_archive_duration_that_is_neither_text_nor_a_timedelta(t, sid, tmp_path, options, mentions):
    with pytest.raises(InvalidRequest, match=mentions):
        t.archive(tmp_path / "x.tlar", **options)
    assert not (tmp_path / "x.tlar").exists()


@pytest.mark.parametrize("options, mentions", [
    ({"limit": "5"}, "limit"),
    ({"limit": 1.5}, "limit"),
    ({"status": "bogus"}, "status"),
    ({"status": 5}, "status"),
])
def test_a_ledger_filter_of_the_wrong_kind(t, sid, options, mentions):
    with pytest.raises(InvalidRequest, match=mentions):
        t.ledger(**options)


def test_rebuild_given_one_name_as_a_string_rebuilds_that_model(t, sid):
    report = t.maintenance.rebuild("routes")
    assert report["projections"] == ["routes"]


@pytest.mark.parametrize("options, mentions", [
    ({"location": None}, "location"),
    ({"location": 123}, "location"),
    ({"location": b"t.db"}, "location"),
    ({"views": 5}, "views"),
    ({"config": "fast"}, "config"),
])
def test_a_turnlog_opened_with_the_wrong_kind_of_argument_makes_no_file(tmp_path, monkeypatch, options, mentions):
    from turnlog import Turnlog
    monkeypatch.chdir(tmp_path)
    options = {"location": str(tmp_path / "t.db"), **options}
    with pytest.raises(InvalidRequest, match=mentions):
        Turnlog(options.pop("location"), **options)
    assert os.listdir(tmp_path) == []
