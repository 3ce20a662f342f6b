"""Search knows what became of each message: undone and retried ones are hidden unless asked for
(then marked), compacted originals stay searchable and are marked; a rebuild gives the same."""

from __future__ import annotations

import json

from click.testing import CliRunner

from turnlog import Turnlog
from turnlog.cli import main

from chat import alice, echo


def chat(t: Turnlog, *texts: str) -> str:
    for i, text in enumerate(texts):
        [outcome] = t.handle_message(alice(f"m{i}"), text, echo, lambda text: None)
    return outcome.session_id


def hits(t: Turnlog, query: str, **options) -> list[tuple[int, str | None]]:
    return sorted((h.seq, h.fate) for h in t.search(query, **options))


def test_undone_and_retried_messages_are_hidden_unless_asked_for(t):
    chat(t, "apple one", "apple two", "apple three")
    t.command(alice("u1"), "/undo")
    assert hits(t, "apple") == [(1, None), (2, None), (3, None), (4, None)]
    assert hits(t, "apple", include_undone=True) == [(1, None), (2, None), (3, None), (4, None),
                                                     (5, "undone"), (6, "undone")]
    t.command(alice("r1"), "/retry")
    t.run_next(alice(), echo, lambda text: None)
    assert hits(t, "two", include_undone=True) == [(3, "retried"), (4, "retried"), (7, None), (8, None)]
    assert hits(t, "two") == [(7, None), (8, None)]


def test_compacted_originals_stay_searchable_and_are_marked(t):
    session_id = chat(t, "banana one", "banana two", "banana three")
    done = t.compact(session_id, summary="they talked about bananas", keep_turns=1)
    assert (done.from_seq, done.upto_seq) == (1, 4)
    assert hits(t, "banana") == [(1, "compacted"), (2, "compacted"), (3, "compacted"), (4, "compacted"),
                                 (5, None), (6, None)]
    # An undo after it reaches only the kept turn.
    assert t.command(alice("u1"), "/undo 3").reply.startswith("↩️ Undid 1 turn(s)")
    assert hits(t, "banana", include_undone=True)[-2:] == [(5, "undone"), (6, "undone")]


def test_cli_search_include_undone(t, db):
    chat(t, "cherry one", "cherry two")
    t.command(alice("u1"), "/undo")
    default = json.loads(CliRunner().invoke(main, ["--db", db, "search", "cherry", "--json"]).output)
    assert sorted(h["seq"] for h in default) == [1, 2]
    every = CliRunner().invoke(main, ["--db", db, "search", "cherry", "--include-undone"])
    assert every.exit_code == 0 and "undone" in every.output


def test_a_rebuild_gives_every_fate_back(t):
    session_id = chat(t, "date one", "date two", "date three", "date four")
    t.compact(session_id, summary="dates", keep_turns=2)
    t.command(alice("u1"), "/undo")
    t.command(alice("r1"), "/retry")
    t.run_next(alice(), echo, lambda text: None)
    before = [h.to_dict() for h in t.search("date", include_undone=True, limit=50)]
    assert {h["fate"] for h in before} == {None, "compacted", "undone", "retried"}
    t.maintenance.rebuild(["search"])
    assert [h.to_dict() for h in t.search("date", include_undone=True, limit=50)] == before
