"""Acceptance: the projection runner's rebuild fills fresh tables, swaps them in, and resumes
after being killed with SIGKILL, ending with the same rows as a clean rebuild."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from harness import procs
from turnlog import InvalidRequest, ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.cli import main

SOURCES = [
    SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", user_name="alice"),
    SessionSource(platform="slack", chat_type="channel", chat_id="C1", user_id="U1", scope_id="T1"),
    SessionSource(platform="discord", chat_type="thread", chat_id="5", thread_id="8", user_id="9", scope_id="G1"),
    SessionSource(platform="whatsapp", chat_type="dm", chat_id="15551234567"),
]
TURNS = 240


def fill(db: str, turns: int = TURNS) -> None:
    clock = ManualClock("2026-03-01T10:00:00+00:00")
    with Turnlog(db, clock=clock, session_ids=SequentialIds()) as t:
        for n in range(turns):
            clock.advance(7)
            source = SOURCES[n % len(SOURCES)]
            t.handle_message(source, f"question {n}: 数据库 kiwi {n % 7}", lambda history, item: f"answer {n} 迁移",
                             lambda text: None)
        t.maintenance.catch_up()


def table_dump(db: str) -> dict[str, list[tuple]]:
    """Every row of every read-model table (full-text index internals aside), in key order."""
    conn = sqlite3.connect(db)
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            " AND name NOT LIKE 'search_fts%' AND name NOT IN ('stored_events', 'snapshots', 'projection_rebuilds',"
            " 'chain')")]
        return {name: sorted(conn.execute(f"SELECT * FROM [{name}]").fetchall(), key=repr) for name in names}
    finally:
        conn.close()


def copy_db(src: str, dst: str) -> None:
    """A copy of the database, with the key file that opens it (encrypted by default)."""
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
    finally:
        a.close()
        b.close()
    if os.path.exists(src + ".key"):
        shutil.copyfile(src + ".key", dst + ".key")


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> str:
    db = str(tmp_path_factory.mktemp("log") / "turnlog.db")
    fill(db)
    return db


# Not conftest's `db`: a fresh copy of the module's `filled` log, so each test may change it.
@pytest.fixture
def db(filled, tmp_path) -> str:
    path = str(tmp_path / "turnlog.db")
    copy_db(filled, path)
    return path


@pytest.mark.parametrize("workers", [1, 2])
def test_rebuild_killed_with_sigkill_resumes_and_ends_like_a_clean_rebuild(db, tmp_path, workers):
    clean = str(tmp_path / "clean.db")
    copy_db(db, clean)
    with Turnlog(db) as t:
        head = t.maintenance.projection_status()[0].head
        routes_before = t.routes()
        child = subprocess.Popen([sys.executable, "-m", "turnlog", "--db", db, "rebuild", "--all", "--batch", "100",
                                  "--pause", "25", "--workers", str(workers), "--json"], env=procs.child_env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            while True:
                reached = [s.rebuild_position or 0 for s in t.maintenance.projection_status()]
                if 0 < min(reached) and max(reached) < head:  # every projection midway
                    break
                assert child.poll() is None, f"the rebuild ended before it could be killed: {child.communicate()}"
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.wait()
        assert child.returncode == -signal.SIGKILL

        # A helper process (workers=2) dies with the rebuild that started it: nothing moves on.
        time.sleep(0.3)
        settled = {s.name: s.rebuild_position for s in t.maintenance.projection_status()}
        time.sleep(0.5)
        assert {s.name: s.rebuild_position for s in t.maintenance.projection_status()} == settled

        status = {s.name: s for s in t.maintenance.projection_status()}
        interrupted = {name: s.rebuild_position for name, s in status.items()}
        assert all(p is not None and 0 < p < head for p in interrupted.values()), interrupted
        assert t.routes() == routes_before  # the live read models kept serving, untouched

    resumed = cli("--db", db, "rebuild", "--all", "--workers", str(workers), "--json")
    assert resumed.exit_code == 0, resumed.output
    report = orjson.loads(resumed.output)
    assert report["workers"] == 1  # every projection is midway: this process takes them all on
    assert report["resumed"] == interrupted
    assert report["events"] == head - min(interrupted.values())  # only the rest of the log was read

    with Turnlog(db) as t:
        assert all(s.rebuild_position is None and s.position == head for s in t.maintenance.projection_status())
    assert not [n for n in table_dump(db) if n.endswith("__rebuild")]

    assert cli("--db", clean, "rebuild", "--all", "--json").exit_code == 0
    assert table_dump(db) == table_dump(clean)
    with Turnlog(db) as t, Turnlog(clean) as c:
        assert t.search("kiwi", limit=50) == c.search("kiwi", limit=50)
        assert t.search("数据", limit=50) == c.search("数据", limit=50)
    assert cli("--db", db, "verify").exit_code == 0


def test_rebuild_reports_progress_after_each_batch(db):
    calls = []
    with Turnlog(db) as t:
        head = t.maintenance.projection_status()[0].head
        report = t.maintenance.rebuild(["timeline", "search"], batch=500, progress=lambda d, n: calls.append((d, n)))
    assert report["events"] == head
    assert [d for d, _ in calls] == sorted({d for d, _ in calls})  # increasing
    assert calls[-1] == (head, head)
    assert len(calls) == -(-head // 500)


def test_rebuilding_one_projection_leaves_the_others_alone(db):
    conn = sqlite3.connect(db)
    conn.execute("UPDATE routes SET bound_reason='hand edited'")
    conn.commit()
    conn.close()
    before = table_dump(db)
    with Turnlog(db) as t:
        t.maintenance.rebuild(["search"])
    after = table_dump(db)
    assert after["routes"] == before["routes"]
    assert after["search_messages"] == before["search_messages"]


def test_cli_rebuild_json_is_quiet_and_text_names_what_was_rebuilt(db):
    as_json = cli("--db", db, "rebuild", "routes", "sessions", "--json")
    assert as_json.exit_code == 0
    report = orjson.loads(as_json.output)
    assert report["projections"] == ["routes", "sessions"] and report["seconds"] >= 0
    text = cli("--db", db, "rebuild", "--all")
    assert text.exit_code == 0
    assert text.output.startswith("rebuilt from ") and "search" in text.output
    for args in (["rebuild"], ["rebuild", "routes", "--all"], ["rebuild", "nonsense"], ["rebuild", "--batch", "0"]):
        result = cli("--db", db, *args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output


def test_catch_up_after_new_events_extends_rebuilt_models(db):
    with Turnlog(db) as t:
        t.maintenance.rebuild()
        before = len(t.search("papaya"))
        session_id = t.get_or_create_session(SOURCES[0]).session_id
        token = t.turns.acquire_lease(session_id, t.routing_key(SOURCES[0]), timeout=1)
        t.turns.append_message(token, "user", "papaya please")
        t.turns.release_lease(token)
        assert len(t.search("papaya")) == before + 1
        assert t.maintenance.verify()["ok"] is True


def test_a_rebuild_shared_by_two_processes_ends_like_one_by_a_single_process(db, tmp_path):
    single = str(tmp_path / "single.db")
    copy_db(db, single)
    with Turnlog(db) as t:
        head = t.maintenance.projection_status()[0].head
        calls = []
        report = t.maintenance.rebuild(workers=2, batch=300, progress=lambda d, n: calls.append((d, n)))
    with Turnlog(single) as t:
        assert t.maintenance.rebuild(workers=1)["events"] == head
    assert (report["events"], report["workers"]) == (head, 2)
    assert calls and calls[-1] == (head, head)
    assert table_dump(db) == table_dump(single)
    assert cli("--db", db, "verify").exit_code == 0


def test_rebuild_workers_must_be_a_positive_number(db):
    with Turnlog(db) as t:
        with pytest.raises(InvalidRequest, match="workers must be a positive whole number"):
            t.maintenance.rebuild(workers=0)
    result = cli("--db", db, "rebuild", "--all", "--workers", "0")
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_a_gateway_with_its_asyncio_face_open_still_shares_a_rebuild_with_a_helper(db, tmp_path):
    """The asyncio face's store threads are held still for the fork (each runs a call only while
    holding its fork guard), so an open AsyncTurnlog does not turn a shared rebuild into a lone one."""
    import asyncio

    from turnlog.aio import AsyncTurnlog

    single = str(tmp_path / "single.db")
    copy_db(db, single)
    with Turnlog(db) as t:
        face = AsyncTurnlog(t)
        assert asyncio.run(face.run(t.sessions)) is not None  # its threads have run a call
        report = t.maintenance.rebuild(workers=2, batch=300)
        face.shutdown_threads()
    with Turnlog(single) as t:
        t.maintenance.rebuild(workers=1)
    assert report["workers"] == 2
    assert table_dump(db) == table_dump(single)


def test_a_failed_helper_process_is_reported_and_a_rerun_finishes_the_rebuild(db, tmp_path, monkeypatch):
    from turnlog import StoreError
    from turnlog.projections.runner import ProjectionRunner

    single = str(tmp_path / "single.db")
    copy_db(db, single)

    def broken(self, names, path, **options):
        raise RuntimeError("disk on fire")

    with Turnlog(db) as t:
        with monkeypatch.context() as m:
            m.setattr(ProjectionRunner, "fill_elsewhere", broken)  # the forked helper runs this
            with pytest.raises(StoreError, match="rebuild helper process failed"):
                t.maintenance.rebuild(workers=2)
        assert any(s.rebuild_position is not None for s in t.maintenance.projection_status())  # kept for a rerun
        assert t.maintenance.rebuild(workers=2)["workers"] == 2
    with Turnlog(single) as t:
        t.maintenance.rebuild(workers=1)
    assert table_dump(db) == table_dump(single)


def test_a_process_with_other_threads_rebuilds_alone(db):
    import threading

    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        with Turnlog(db) as t:
            report = t.maintenance.rebuild(workers=2)  # forking would copy no other thread
    finally:
        stop.set()
        other.join()
    assert report["workers"] == 1 and report["events"] == report["head"]


def test_a_damaged_helper_file_left_by_a_killed_rebuild_is_dropped_and_the_rebuild_ends_like_a_clean_one(db, tmp_path):
    """A helper's file is not synced (a power cut may leave it damaged): it is checked first."""
    clean = str(tmp_path / "clean.db")
    copy_db(db, clean)
    with Turnlog(db) as t:
        t.maintenance.rebuild(workers=2, batch=300)
    left = db + "-rebuild-part1.db"
    with open(left, "wb") as f:
        f.write(b"SQLite format 3\x00" + os.urandom(8192))
    result = cli("--db", db, "rebuild", "--all", "--json")
    assert result.exit_code == 0, result.output
    assert not os.path.exists(left)
    assert cli("--db", clean, "rebuild", "--all", "--json").exit_code == 0
    assert table_dump(db) == table_dump(clean)


def test_a_rebuild_started_while_another_holds_the_rebuild_lock_is_refused_and_leaves_its_files_alone(db, tmp_path):
    """Two rebuilds at once: the second is refused (two rebuilds swapping the same fresh tables
    crashed one of them), and neither takes nor deletes the first one's helper file."""
    import fcntl

    from turnlog.errors import StoreError

    clean = str(tmp_path / "clean.db")
    copy_db(db, clean)
    left = db + "-rebuild-part1.db"
    with open(left, "wb") as f:
        f.write(b"a helper's file, still being written")
    lock = os.open(db + "-rebuild.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a running rebuild holds it
        with Turnlog(db) as t:
            with pytest.raises(StoreError, match="another rebuild is running"):
                t.maintenance.rebuild(workers=2)
        assert Path(left).read_bytes() == b"a helper's file, still being written"
    finally:
        os.close(lock)
    os.remove(left)
    with Turnlog(db) as t:
        report = t.maintenance.rebuild(workers=2)
    assert report["events"] == report["head"]
    assert cli("--db", clean, "rebuild", "--all", "--json").exit_code == 0
    assert table_dump(db) == table_dump(clean)
