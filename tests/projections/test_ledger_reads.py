"""The ledger reads the words of a page of deliveries in one read of the log, not one (or two)
per row: the ledger's read model knows the position of the transcript message each turn's
delivery refers to. Counted as statements on the log's table, through a trace on every SQLite
connection the engine opens."""

import sqlite3
from dataclasses import replace

import pytest

from turnlog import SequentialIds, Turnlog

from chat import ALICE


@pytest.fixture
def traced(monkeypatch):
    statements: list[str] = []
    connect = sqlite3.connect

    def traced_connect(*args, **kwargs):
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn
    monkeypatch.setattr(sqlite3, "connect", traced_connect)
    return statements


def log_reads_of_a_ledger(db, clock, statements, turns):
    with Turnlog(db, clock=clock, session_ids=SequentialIds(), owner="gw") as t:
        for n in range(turns):
            source = replace(ALICE, chat_id=str(100 + n), user_id=str(100 + n), message_id=f"m{n}")
            t.handle_message(source, f"hello {n}", lambda history, item: f"re: {item.text}", lambda text: None)
        t.ledger()  # caught up
        statements.clear()
        rows = t.ledger()
        reads = [s for s in statements if "stored_events" in s and s.lstrip().upper().startswith("SELECT")]
    assert sorted(r.content for r in rows) == sorted(f"re: hello {n}" for n in range(turns))
    return reads


def test_the_ledger_of_n_deliveries_reads_their_words_in_one_read(tmp_path, clock, traced):
    few = log_reads_of_a_ledger(str(tmp_path / "few.db"), clock, traced, 3)
    many = log_reads_of_a_ledger(str(tmp_path / "many.db"), clock, traced, 30)
    assert len(many) == len(few) <= 2, many  # the catch-up check and one read of the events
