"""The names the public API had before its reorganisation still work for one release: each
warns (DeprecationWarning, pointing at the caller's line) and behaves as the new name does."""

from __future__ import annotations

import dataclasses
import warnings

import pytest


from chat import alice


def test_an_old_attribute_warns_and_gives_the_collaborator(t) -> None:
    with pytest.warns(DeprecationWarning, match=r"Turnlog\.views is deprecated") as caught:
        views = t.views
    assert views is t._views
    assert caught[0].filename == __file__


def test_an_unknown_attribute_is_still_an_attribute_error(t) -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nonsense'"):
        t.nonsense  # noqa: B018


def test_old_lease_methods_warn_and_run_the_turns_group(t) -> None:
    session_id = t.get_or_create_session(alice()).session_id
    with pytest.warns(DeprecationWarning, match=r"use Turnlog\.turns\.acquire_lease"):
        token = t.acquire_lease(session_id, "key")
    with pytest.warns(DeprecationWarning, match=r"use Turnlog\.turns\.append_message"):
        t.append_message(token, "user", "hi")
    with pytest.warns(DeprecationWarning, match=r"use Turnlog\.turns\.holder"):
        assert t.lease_holder(session_id) == t.turns.holder(session_id).to_dict()
    with pytest.warns(DeprecationWarning):
        assert t.release_lease(token)
    assert [m.content for m in t.turns.transcript(session_id)] == ["hi"]


def test_the_lease_commands_once_at_t_turns_still_answer_there(t) -> None:
    session_id = t.get_or_create_session(alice()).session_id
    with pytest.warns(DeprecationWarning, match=r"Turnlog\.turns\.acquire is deprecated"):
        token = t.turns.acquire(session_id, "key")
    assert t.turns.holder(session_id).epoch == token.epoch
    with pytest.raises(AttributeError):
        t.turns.nonsense  # noqa: B018


def test_old_maintenance_methods_return_what_they_returned(t) -> None:
    t.get_or_create_session(alice())
    with pytest.warns(DeprecationWarning):
        assert t.rebuild() == t.maintenance.rebuild()["events"]
    with pytest.warns(DeprecationWarning):
        assert t.verify_chain() == t.maintenance.verify_chain().breaks == []
    with pytest.warns(DeprecationWarning):
        assert t.chain_report() == t.maintenance.verify_chain()
    with pytest.warns(DeprecationWarning):
        assert t.projections_behind() == t.maintenance.projections_behind() == 0


def test_show_is_the_session_row_with_its_lease_and_transcript(t) -> None:
    session_id = t.get_or_create_session(alice()).session_id
    with pytest.warns(DeprecationWarning, match=r"Turnlog\.show is deprecated"):
        shown = t.show(session_id)
    assert shown == {**t.session(session_id).to_dict(), "lease": None, "messages": []}


def test_session_takes_a_routing_key_as_show_did(t) -> None:
    session_id = t.get_or_create_session(alice()).session_id
    assert t.session(alice()).session_id == t.session(t.routing_key(alice())).session_id == session_id


def test_a_row_read_as_a_dict_warns_and_answers(t) -> None:
    t.get_or_create_session(alice())
    row = t.sessions()[0]
    with pytest.warns(DeprecationWarning, match="reading a SessionRow as a dict is deprecated"):
        assert row["session_id"] == row.session_id
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert {**row} == dict(row) == row.to_dict()
        assert row.get("nonsense", 1) == 1 and "session_key" in row
        with pytest.raises(KeyError):
            row["nonsense"]


def test_a_row_iterated_counted_and_compared_as_a_dict_warns_and_answers_as_the_dict_did(t) -> None:
    t.get_or_create_session(alice())
    row = t.sessions()[0]
    old = row.to_dict()
    for read, answer in [(lambda: list(row), list(old)), (lambda: len(row), len(old)),
                         (lambda: row == old, True), (lambda: old == row, True), (lambda: row != old, False),
                         (lambda: row == {**old, "title": "other"}, False), (lambda: [*row], [*old])]:
        with pytest.warns(DeprecationWarning, match="reading a SessionRow as a dict is deprecated") as caught:
            assert read() == answer
        assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # none of these reads it as a dict
        assert row == t.sessions()[0] and not row != t.sessions()[0] and bool(row)
        assert row != dataclasses.replace(row, title="other")
        assert row != "a string" and row != 5


@pytest.mark.parametrize("old, new", [("acquire", "Turnlog.turns.acquire_lease"),
                                      ("renew", "Turnlog.turns.renew_lease"),
                                      ("release", "Turnlog.turns.release_lease"),
                                      ("append", "Turnlog.turns.append_message")])
def test_an_old_lease_command_at_t_turns_names_its_replacement(t, old, new) -> None:
    with pytest.warns(DeprecationWarning) as caught:
        getattr(t.turns, old)
    assert str(caught[0].message) == f"Turnlog.turns.{old} is deprecated and goes in the next release: use {new}"


@pytest.mark.parametrize("old, new", [("views", "Turnlog's reads"), ("slash", "Turnlog.command"),
                                      ("projections", "Turnlog.maintenance"), ("chain", "Turnlog.maintenance"),
                                      ("rotation", "Turnlog.turns.rotate_session"), ("forks", "Turnlog.fork"),
                                      ("inbound", "Turnlog.accept")])
def test_an_old_attribute_names_its_replacement(t, old, new) -> None:
    with pytest.warns(DeprecationWarning) as caught:
        getattr(t, old)
    message = str(caught[0].message)
    assert message.startswith(f"Turnlog.{old} is deprecated and goes in the next release: use {new}")
    assert "a public method" not in message
