"""Erase on a PostgreSQL log: after it, no table of the database holds the phrase in its text
(every column of every row, as PostgreSQL renders it), the local read-model file neither, and
the log's chain still verifies. A throwaway server (tests/postgres_server.py)."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

from postgres_server import create_database, server
from turnlog import ManualClock, SequentialIds, Turnlog

from chat import BOB, alice, collect, echo

PHRASE = "quince observatory 4408"


@pytest.fixture(scope="module")
def pg():
    with server() as prefix:
        yield prefix


def every_table_text(url: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) FROM information_schema.tables"
            " WHERE table_schema NOT IN ('pg_catalog', 'information_schema')")]
        return "\n".join(str(row) for table in tables
                         for row in conn.execute(f"SELECT t::text FROM {table} t"))  # bytea shown as hex


def test_an_erased_phrase_is_in_no_table_of_the_postgresql_log_nor_the_read_models(pg, tmp_path, monkeypatch):
    monkeypatch.setenv("TURNLOG_COMPACT_EVENTS", "0")  # plain JSON events: a phrase stored in clear would show
    url = create_database(pg, "erase_pg")
    views = str(tmp_path / "views.db")
    key = os.urandom(32)
    with Turnlog(url, views=views, clock=ManualClock(), session_ids=SequentialIds(), master_key=key) as t:
        assert t.key_fingerprint is not None
        t.handle_message(alice(user_name="quincefan"), PHRASE, echo, collect([]))
        hex_phrase = PHRASE.encode().hex()
        report = t.erase_subject("telegram:42", actor="operator", cause="erase request")
        assert report.keys == 1
        text = every_table_text(url)
        for needle in (PHRASE, hex_phrase, "quincefan", b"quincefan".hex()):
            assert needle not in text, needle
        assert t.maintenance.verify_chain().breaks == []
        assert [m["content"] for m in t.transcript(report.sessions[0])] == ["[erased]", "[erased]"]
    local = b"".join(Path(p).read_bytes() for p in glob.glob(views + "*") if os.path.isfile(p))
    assert PHRASE.encode() not in local


def test_a_postgresql_log_without_a_given_key_is_not_encrypted(pg, tmp_path):
    url = create_database(pg, "plain_pg")
    with Turnlog(url, views=str(tmp_path / "v.db")) as t:
        assert t.key_fingerprint is None


def test_another_nodes_words_after_an_erase_are_kept_and_its_read_models_refilled_on_postgresql(pg, tmp_path):
    url = create_database(pg, "erase_elsewhere_pg")
    key, ids = os.urandom(32), SequentialIds()
    options = dict(clock=ManualClock(), session_ids=ids, master_key=key)
    with Turnlog(url, views=str(tmp_path / "a.db"), owner="gateway-a", **options) as a, \
            Turnlog(url, views=str(tmp_path / "b.db"), owner="gateway-b", **options) as b:
        first = b.handle_message(alice("m1"), PHRASE, echo, collect([]))[0]  # b now holds the subject's key
        assert b.search("quince")  # in b's own read models
        a.erase_subject("telegram:42", actor="operator", cause="erase request")
        after = b.handle_message(alice("m2"), "later words", echo, collect([]))[0]
        # b's read models, a file a's erase did not touch, were refilled when b read the erase
        assert b.search("quince") == [] and b.search("later")
        assert [m["content"] for m in b.transcript(first.session_id)] == ["[erased]", "[erased]"]
    for views in ("a.db", "b.db"):
        local = b"".join(Path(p).read_bytes() for p in glob.glob(str(tmp_path / views) + "*") if os.path.isfile(p))
        assert PHRASE.encode() not in local, views
    with Turnlog(url, views=str(tmp_path / "reader.db"), master_key=key) as reader:
        assert [m["content"] for m in reader.transcript(after.session_id)] == ["later words", "re: later words"]
        assert [m["content"] for m in reader.transcript(first.session_id)] == ["[erased]", "[erased]"]


def test_a_new_nodes_first_catch_up_past_an_erase_builds_its_read_models_once_on_postgresql(pg, tmp_path):
    """The erase behind a new node's empty read models makes its first catch-up a refill from the
    log (blue/green): that refill is the whole catch-up, every event read once, not a rebuild and
    then a pass over the same log again."""
    url = create_database(pg, "erase_new_node_pg")
    key = os.urandom(32)
    with Turnlog(url, views=str(tmp_path / "a.db"), owner="gateway-a", clock=ManualClock(),
                 session_ids=SequentialIds(), master_key=key) as a:
        for n in range(3):
            a.handle_message(alice(f"m{n}"), f"{PHRASE} {n}", echo, collect([]))
            a.handle_message(BOB, f"bob's words {n}", echo, collect([]))
        a.erase_subject("telegram:42", actor="operator", cause="erase request")
        a.handle_message(BOB, "after the erase", echo, collect([]))
        head = a.maintenance.log_head()
    with Turnlog(url, views=str(tmp_path / "new.db"), owner="new-node", master_key=key) as new:
        assert new.maintenance.catch_up() == head  # one pass: each event of the log read once
        assert new.maintenance.catch_up() == 0
        assert {(p.position, p.rebuild_position) for p in new.maintenance.projection_status()} == {(head, None)}
        assert new.search("quince") == [] and len(new.search("bob's")) == 6  # his 3 and their echoes
