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


@pytest.mark.parametrize("value", [None, 5, b"20260101_000000_abcd1234", ["s"]])
@pytest.mark.parametrize("read", ["transcript", "session_version", "usage", "session", "title", "history",
                                  "export", "turns.transcript", "turns.agent_history", "turns.holder"])
def test_a_session_id_that_is_not_a_string(t, sid, read, value):
    group, _, name = read.rpartition(".")
    method = getattr(t.turns if group else t, name)
    with pytest.raises(InvalidRequest, match=r"must be a (string|session id)") as e:
        method(value)
    assert type(value).__name__ in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("when", ["#\u0661", "#\uff11", "#1_0", "#+1", "# 1", "#1 ", True,
                                  "\u0662\u0660\u0662\u0666-01-01T00:00:00+00:00", "2026-01-01T00:00:00+00:00\u200b"])
def test_a_moment_that_is_not_ascii_iso_8601_or_a_plain_position(t, sid, when):
    with pytest.raises(InvalidRequest, match="moment|position") as e:
        t.at(when)
    assert repr(when) in str(e.value)
    with pytest.raises(InvalidRequest):
        t.history(sid, since=when)


@pytest.mark.parametrize("options", [{"older_than": "\u0669\u0660d"}, {"idle_for": "\uff19\uff10d"}])
def test_an_archive_duration_in_other_digits(t, sid, tmp_path, options):
    with pytest.raises(InvalidRequest, match="duration"):
        t.archivable(**options)


@pytest.mark.parametrize("since", ["\u0662\u0660\u0662\u0666-01-01", "2026-01-01T00:00:00+00:00\u0660"])
def test_a_search_bound_in_other_digits(t, sid, since):
    with pytest.raises(InvalidRequest, match="since"):
        t.search("hello", since=since)
