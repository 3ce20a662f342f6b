"""Processes racing get_or_create_session on one fresh key per round, released together by a
barrier (for the SQLite and the PostgreSQL tests): each reports (round, session id, created)."""

from __future__ import annotations

import multiprocessing
from collections import defaultdict
from typing import Any

from turnlog.api import Turnlog
from turnlog.domain.source import SessionSource

TIMEOUT_S = 60


def source_for_round(round_no: int) -> SessionSource:
    return SessionSource(platform="telegram", chat_type="group", chat_id=f"-100{round_no}")


def race(db: str, views: str | None, rounds: int, start: Any, reports: Any) -> None:
    """One worker process: open the store, then route the round's key as soon as all are ready."""
    try:
        with Turnlog(db, views=views) as engine:
            for round_no in range(rounds):
                start.wait(timeout=TIMEOUT_S)
                result = engine.get_or_create_session(source_for_round(round_no))
                reports.put((round_no, result.session_id, result.created))
    except BaseException as error:  # report instead of dying silently
        reports.put(("error", repr(error), None))
        raise


def run(db: str, views: list[str | None], rounds: int) -> dict[str, Any]:
    """Race one process per entry of `views`; returns what they reported, grouped by round."""
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(len(views))
    reports = spawn.Queue()
    workers = [spawn.Process(target=race, args=(db, v, rounds, start, reports)) for v in views]
    for worker in workers:
        worker.start()
    received: list[tuple[Any, ...]] = []
    try:
        while len(received) < len(views) * rounds:
            received.append(reports.get(timeout=TIMEOUT_S))
            if received[-1][0] == "error":
                break
    finally:
        start.abort()  # a worker still waiting for a round that will not come stops now
        for worker in workers:
            worker.join(timeout=TIMEOUT_S)
            if worker.is_alive():
                worker.terminate()
    ids: dict[int, list[str]] = defaultdict(list)
    created: dict[int, int] = defaultdict(int)
    for round_no, session_id, was_created in (r for r in received if r[0] != "error"):
        ids[round_no].append(session_id)
        created[round_no] += bool(was_created)
    return {"errors": [r for r in received if r[0] == "error"], "reports": len(received),
            "exit_codes": [w.exitcode for w in workers], "ids": ids, "created": created}
