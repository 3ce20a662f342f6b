"""The read side (issue 14, item 1): every query of a projection's tables lives in projections/,
returns typed rows, and reads never write (no catch-up, no sealing on the query path)."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path

import turnlog
from turnlog import ManualClock, SequentialIds, Turnlog

from chat import alice, reply_with

ROOT = Path(turnlog.__file__).parent


def projection_tables() -> set[str]:
    from turnlog.api import Turnlog as T  # the projections a Turnlog runs
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, T(f"{tmp}/x.db") as t:
        return {table for p in t._projections.projections.values() for table in p.tables}


def test_no_sql_on_a_projection_table_outside_projections():
    tables = projection_tables()
    assert {"routes", "sessions", "deliveries", "queue_items", "leases", "route_history",
            "timeline_streams"} <= tables
    pattern = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+\[?(" + "|".join(sorted(tables)) + r")\b", re.IGNORECASE)
    offenders = []
    for path in ROOT.rglob("*.py"):
        # turnlog/hermes reads and writes Hermes' own state.db, whose `sessions` is Hermes' table.
        if {"projections", "hermes"} & set(path.relative_to(ROOT).parts):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line) and ("SELECT" in line.upper() or "INSERT" in line.upper()
                                         or "UPDATE" in line.upper() or "JOIN" in line.upper()):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []


def test_views_return_typed_rows_and_never_catch_up(tmp_path, monkeypatch):
    # SQLite's own checkpoint in the commit, not the background thread's, which may fold the WAL
    # into the file between the two digests below: that is the writes' doing, not the reads'.
    monkeypatch.setenv("TURNLOG_WAL_CHECKPOINT", "inline")
    with Turnlog(str(tmp_path / "gw.db"), clock=ManualClock(), session_ids=SequentialIds()) as t:
        t.handle_message(alice("m1"), "hello", reply_with("hi"), lambda text: None)
        assert t._views.sessions() == []  # the views read the models as they are: not caught up yet
        assert len(t.sessions()) == 1  # the facade catches up first (read-your-writes)
        rows = t._views.sessions()
        assert dataclasses.is_dataclass(rows[0]) and rows[0].session_key == "agent:main:telegram:dm:42"
        assert dataclasses.is_dataclass(t._views.routes()[0])
        delivery, content = t._views.ledger()[0]
        assert dataclasses.is_dataclass(delivery) and delivery.state == "delivered" and content == "hi"
        t.handle_message(alice("m1"), "again", reply_with("hi"), lambda text: None)
        before = t._projections.positions()
        files = [tmp_path / "gw.db", tmp_path / "gw.db-wal"]

        def digest() -> list[str]:
            return [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]
        written = digest()
        t._views.sessions(), t._views.ledger(), t._views.held_leases(), t._views.owed_deliveries()
        t._views.search("hello")
        assert t._projections.positions() == before  # nothing moved
        assert digest() == written


def test_the_facade_has_no_sql_of_its_own():
    source = (ROOT / "api.py").read_text()
    assert "_query" not in source and "SELECT" not in source
