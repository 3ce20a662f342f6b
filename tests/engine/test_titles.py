"""/title: set or show a session's title as a SessionTitled event, cleaned and held by one session
at a time as Hermes 0.19.0 has it; shown in the session rows, searchable through sessions(title=),
and visible in time travel."""

from __future__ import annotations

import pytest

from turnlog import InvalidRequest, SessionSource
from chat import alice, echo

BOB = SessionSource(platform="telegram", chat_type="dm", chat_id="7", user_id="7")


def talk(t, source, text="hello"):
    return t.handle_message(source, text, echo, lambda text: None)[0].session_id


def test_title_sets_and_shows_the_title_as_an_event(t):
    session_id = talk(t, alice())

    shown = t.command(alice(), "/title")
    set_ = t.command(alice("m2"), "/title  Trip \u200bplanning ")
    again = t.command(alice(), "/title")

    assert shown.reply == f"Session: {session_id}\nNo title set. Usage: /title <name>" and not shown.changed
    assert set_.reply == "Session title set: Trip planning" and set_.changed and set_.session_id == session_id
    assert again.reply == f"Session: {session_id}\nTitle: Trip planning"
    assert t.session(session_id).title == "Trip planning" and t.title(session_id) == "Trip planning"
    [titled] = [h for h in t.history(session_id) if h.event == "SessionTitled"]
    assert titled.data["title"] == "Trip planning" and titled.data["previous_title"] is None
    assert titled.actor == "telegram:user:42" and titled.cause == "command:/title:m2"


def test_a_new_title_records_the_one_it_replaced(t):
    session_id = talk(t, alice())
    t.command(alice(), "/title first")
    t.command(alice(), "/title second")

    titled = [h.data for h in t.history(session_id) if h.event == "SessionTitled"]
    assert [(d["previous_title"], d["title"]) for d in titled] == [(None, "first"), ("first", "second")]


def test_setting_the_same_title_again_records_nothing(t):
    session_id = talk(t, alice())
    t.command(alice(), "/title same")
    result = t.command(alice(), "/title same")

    assert result.changed is False
    assert len([h for h in t.history(session_id) if h.event == "SessionTitled"]) == 1


def test_titles_are_cleaned_and_limited_as_hermes_does(t):
    session_id = talk(t, alice())

    assert t.set_title(session_id, "a\x00b\tc\n\nd\u202e") == "ab c d"
    assert t.set_title(session_id, "x" * 100) == "x" * 100
    with pytest.raises(InvalidRequest, match=r"Title too long \(101 chars, max 100\)"):
        t.set_title(session_id, "x" * 101)
    too_long = t.command(alice(), "/title " + "y" * 101)
    empty = t.command(alice(), "/title \u200b\u200b")

    assert too_long.reply == "⚠️ Title too long (101 chars, max 100)" and not too_long.changed
    assert empty.reply == "Title is empty after cleanup: use printable characters." and not empty.changed
    assert t.title(session_id) == "x" * 100


def test_a_title_names_one_session(t):
    talk(t, alice())
    bobs = talk(t, BOB)
    t.command(alice(), "/title shared name")

    refused = t.command(BOB, "/title shared name")

    assert refused.reply == "⚠️ Title 'shared name' is already in use by another session." and not refused.changed
    assert t.title(bobs) is None
    with pytest.raises(InvalidRequest, match="already in use"):
        t.set_title(bobs, "shared  name")  # the same title once cleaned


def test_clearing_a_title_frees_it(t):
    alices = talk(t, alice())
    bobs = talk(t, BOB)
    t.set_title(alices, "mine")

    assert t.set_title(alices, "") is None
    assert t.set_title(bobs, "mine") == "mine"
    assert t.title(alices) is None


def test_title_on_a_chat_without_a_session_starts_one(t):
    result = t.command(alice(), "/title fresh")

    assert result.changed and t.session(result.session_id).title == "fresh"


def test_sessions_can_be_searched_by_title(t):
    alices = talk(t, alice())
    bobs = talk(t, BOB)
    t.set_title(alices, "Budget review")
    t.set_title(bobs, "Holiday week")

    assert [r.session_id for r in t.sessions(title="budget")] == [alices]
    assert [r.session_id for r in t.sessions(title="E")] == [alices, bobs]
    assert t.sessions(title="nothing like it") == []
    assert {r.session_id: r.title for r in t.sessions()} == {alices: "Budget review", bobs: "Holiday week"}


def test_time_travel_before_a_title_shows_the_old_one_and_diff_names_the_change(t):
    session_id = talk(t, alice())
    t.set_title(session_id, "before")
    before = t.maintenance.log_head()
    t.command(alice(), "/title after")
    after = t.maintenance.log_head()

    assert t.at(before).session(session_id)["title"] == "before"
    assert t.at(after).session(session_id)["title"] == "after"
    change = t.diff(before, after)["sessions"][session_id]
    assert change["session"] == {"title": {"from": "before", "to": "after"}}


def test_the_title_survives_a_rebuild_of_the_read_models(t):
    session_id = talk(t, alice())
    t.set_title(session_id, "kept")

    t.maintenance.rebuild(["sessions"])

    assert t.session(session_id).title == "kept"


def test_two_gateways_giving_one_title_at_once_end_with_one_holder(t, other):
    import threading

    alices, bobs = talk(t, alice()), talk(other, BOB)
    for n in range(10):
        title = f"race {n}"
        start = threading.Barrier(2)
        results: dict[str, object] = {}

        def give(engine, session_id):
            start.wait()
            try:
                results[session_id] = engine.set_title(session_id, title)
            except InvalidRequest as refused:
                results[session_id] = refused

        threads = [threading.Thread(target=give, args=(t, alices)), threading.Thread(target=give, args=(other, bobs))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        winners = [sid for sid, r in results.items() if r == title]
        assert len(winners) == 1, results
        assert [r.session_id for r in t.sessions(title=title)] == winners


def test_a_compression_child_takes_its_ancestors_title_as_hermes_moves_it(t):
    parent = t.get_or_create_session(alice())
    t.set_title(parent.session_id, "long chat")
    token = t.turns.acquire_lease(parent.session_id, parent.session_key)
    for role in ("user", "assistant", "user", "assistant"):
        t.turns.append_message(token, role, role)
    child = t.turns.rotate_session(token, alice()).session_id
    bobs = talk(t, BOB)

    assert t.set_title(child, "long chat") == "long chat"

    assert (t.title(parent.session_id), t.title(child)) == (None, "long chat")
    with pytest.raises(InvalidRequest, match="already in use"):
        t.set_title(bobs, "long chat")  # an unrelated session still may not take it


def test_the_hermes_shaped_export_carries_the_title(t):
    session_id = talk(t, alice())
    assert t.export(session_id)["title"] is None
    t.set_title(session_id, "exported")

    assert t.export(session_id)["title"] == "exported"
