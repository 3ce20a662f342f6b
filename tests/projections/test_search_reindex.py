"""Rebuilding the search model's full-text indexes from its rows alone (`t.maintenance.rebuild_search_index`,
`turnlog rebuild --index-only`): after the indexes are damaged, the same hits as before; refused
when the rows are not the log's or another rebuild runs."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner

from turnlog import ManualClock, SequentialIds, SessionSource, StoreError, Turnlog
from turnlog.cli import main

from chat import ALICE
from test_rebuild_lock import rebuild_held

ZH = "我们讨论了大别山项目的进度"
JA = "カタカナとひらがなのテストです"
MESSAGES = [("user", "this content is about kiwi"), ("assistant", "alpha and omega are far apart"),
            ("user", ZH), ("assistant", JA), ("user", "kiwi again, 大别山 again")]
QUERIES = ["kiwi", "大别山", "ひらがな", '"alpha and omega"', "omega"]
KEY = bytes(range(32))


def seeded(path: str, **options) -> str:
    clock = ManualClock("2026-03-01T10:00:00+00:00")
    with Turnlog(path, clock=clock, session_ids=SequentialIds(), **options) as t:
        session_id = t.get_or_create_session(ALICE).session_id
        token = t.turns.acquire_lease(session_id, t.routing_key(ALICE), timeout=1)
        for role, text in MESSAGES:
            clock.advance(60)
            t.turns.append_message(token, role, text)
        t.turns.release_lease(token)
        t.maintenance.catch_up()
    return path


def hits(t: Turnlog) -> dict[str, list[tuple[str, int, str]]]:
    return {q: [(h.session_id, h.seq, h.snippet) for h in t.search(q)] for q in QUERIES}


def damage(path: str) -> None:
    """Empty both indexes behind turnlog's back, leaving the rows."""
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO search_fts (search_fts) VALUES ('delete-all')")
        db.execute("INSERT INTO search_fts_trigram (search_fts_trigram) VALUES ('delete-all')")
    db.close()


def fts_integrity(path: str) -> None:
    with sqlite3.connect(path) as db:  # raises SQLITE_CORRUPT_VTAB when an index is not its table's
        db.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")
        db.execute("INSERT INTO search_fts (search_fts) VALUES ('integrity-check')")
    db.close()


@pytest.mark.parametrize("options", [{}, {"encryption": True, "master_key": KEY}], ids=["plain", "encrypted"])
def test_the_index_rebuild_gives_back_the_hits_of_before_the_damage(tmp_path, options):
    path = seeded(str(tmp_path / "turnlog.db"), **options)
    with Turnlog(path, **options) as t:
        before = hits(t)
    assert all(before.values()), before
    damage(path)
    with Turnlog(path, **options) as t:
        assert not any(hits(t).values())
        report = t.maintenance.rebuild_search_index()
        assert (report["messages"], report["cjk_messages"]) == (5, 3)
        assert report["seconds"] >= 0
        assert hits(t) == before
        assert t.maintenance.doctor(repair=False)["ok"]
    fts_integrity(path)


def test_the_cli_rebuilds_the_index_only_and_reports_json(tmp_path):
    path = seeded(str(tmp_path / "turnlog.db"))
    damage(path)
    result = CliRunner().invoke(main, ["--db", path, "rebuild", "--index-only", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["projection"], report["messages"], report["cjk_messages"]) == ("search", 5, 3)
    with Turnlog(path) as t:
        assert [h.seq for h in t.search("大别山")] and [h.seq for h in t.search("kiwi")]
    text = CliRunner().invoke(main, ["--db", path, "rebuild", "--index-only"])
    assert text.exit_code == 0 and "5 messages" in text.output


def test_the_index_only_option_takes_no_other_projection_nor_batch_options(tmp_path):
    path = seeded(str(tmp_path / "turnlog.db"))
    for args in (["routes"], ["--all"], ["--workers", "2"], ["--batch", "10"]):
        result = CliRunner().invoke(main, ["--db", path, "rebuild", "--index-only", *args])
        assert result.exit_code == 2, (args, result.output)
        assert "--index-only" in result.output and "Traceback" not in result.output


def test_a_search_model_behind_the_log_is_refused_and_the_log_rebuild_named(tmp_path):
    path = seeded(str(tmp_path / "turnlog.db"))
    with Turnlog(path) as t:  # written, not caught up: the search model is behind
        session_id = t.session(ALICE).session_id
        token = t.turns.acquire_lease(session_id, t.routing_key(ALICE), timeout=1)
        t.turns.append_message(token, "user", "one more")
        t.turns.release_lease(token)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing: this catch-up gives way
    try:
        with Turnlog(path, lock_wait=0) as t:
            with pytest.raises(StoreError) as refused:
                t.maintenance.rebuild_search_index()
            assert t.maintenance.stale
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    message = str(refused.value)
    assert "turnlog rebuild search" in message and "position" in message and "\n" not in message


def test_a_search_index_rebuild_while_another_rebuild_runs_is_refused(tmp_path):
    db = seeded(str(tmp_path / "turnlog.db"))
    with rebuild_held(db) as first:
        second = subprocess.run([sys.executable, "-m", "turnlog", "--db", db, "rebuild", "--index-only"],
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 1, second.stderr
        assert second.stderr.count("\n") == 1 and "another rebuild is running" in second.stderr
    assert first.returncode == 0
