"""Cross-process routing: 8 OS processes race get_or_create_session on one key of one SQLite file.

Each round uses a fresh routing key, and a barrier releases all 8 processes at once, so every
round is a real race to create the key's first session. Optimistic concurrency must leave one
session per round, and every process must be handed that session's id.
"""

from __future__ import annotations

import multiprocessing
from collections import defaultdict
from typing import Any

from turnlog.api import Turnlog
from turnlog.domain.source import SessionSource

PROCESSES = 8
ROUNDS = 20
TIMEOUT_S = 60


def source_for_round(round_no: int) -> SessionSource:
    return SessionSource(platform="telegram", chat_type="group", chat_id=f"-100{round_no}")


def race(db: str, start: Any, reports: Any) -> None:
    """One worker process: open the store, then route the round's key as soon as all are ready."""
    try:
        with Turnlog(db) as engine:
            for round_no in range(ROUNDS):
                start.wait(timeout=TIMEOUT_S)
                result = engine.get_or_create_session(source_for_round(round_no))
                reports.put((round_no, result.session_id, result.created))
    except BaseException as error:  # report instead of dying silently
        reports.put(("error", repr(error), None))
        raise


def test_eight_processes_on_one_key_get_one_session_per_round(tmp_path):
    db = str(tmp_path / "turnlog.db")
    Turnlog(db).close()  # create the schema before the race
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(PROCESSES)
    reports = spawn.Queue()
    workers = [spawn.Process(target=race, args=(db, start, reports)) for _ in range(PROCESSES)]
    for worker in workers:
        worker.start()
    received: list[tuple[Any, ...]] = []
    try:
        while len(received) < PROCESSES * ROUNDS:
            received.append(reports.get(timeout=TIMEOUT_S))
            if received[-1][0] == "error":
                break
    finally:
        start.abort()  # a worker still waiting for a round that will not come stops now
        for worker in workers:
            worker.join(timeout=TIMEOUT_S)
            if worker.is_alive():
                worker.terminate()

    assert [r for r in received if r[0] == "error"] == []
    assert len(received) == PROCESSES * ROUNDS
    assert [w.exitcode for w in workers] == [0] * PROCESSES
    ids_by_round: dict[int, list[str]] = defaultdict(list)
    created_by_round: dict[int, int] = defaultdict(int)
    for round_no, session_id, created in received:
        ids_by_round[round_no].append(session_id)
        created_by_round[round_no] += created
    for round_no in range(ROUNDS):
        assert len(ids_by_round[round_no]) == PROCESSES, f"round {round_no}"
        assert len(set(ids_by_round[round_no])) == 1, f"round {round_no}: {set(ids_by_round[round_no])}"
        assert created_by_round[round_no] == 1, f"round {round_no}"
    with Turnlog(db) as engine:
        sessions = engine.sessions()
        routes = engine.routes()
    assert len(sessions) == ROUNDS
    assert {s["session_id"] for s in sessions} == {ids[0] for ids in ids_by_round.values()}
    assert {r["session_key"]: r["session_id"] for r in routes} == {
        s["session_key"]: s["session_id"] for s in sessions}
