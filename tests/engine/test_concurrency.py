"""Cross-process routing: 8 OS processes race get_or_create_session on one key of one SQLite file.

Each round uses a fresh routing key, and a barrier releases all 8 processes at once, so every
round is a real race to create the key's first session. Optimistic concurrency must leave one
session per round, and every process must be handed that session's id.
"""

from __future__ import annotations

from key_race import run
from turnlog.api import Turnlog

PROCESSES = 8
ROUNDS = 20


def test_eight_processes_on_one_key_get_one_session_per_round(tmp_path):
    db = str(tmp_path / "turnlog.db")
    Turnlog(db).close()  # create the schema before the race
    result = run(db, [None] * PROCESSES, ROUNDS)

    assert result["errors"] == []
    assert result["reports"] == PROCESSES * ROUNDS
    assert result["exit_codes"] == [0] * PROCESSES
    ids_by_round, created_by_round = result["ids"], result["created"]
    for round_no in range(ROUNDS):
        assert len(ids_by_round[round_no]) == PROCESSES, f"round {round_no}"
        assert len(set(ids_by_round[round_no])) == 1, f"round {round_no}: {set(ids_by_round[round_no])}"
        assert created_by_round[round_no] == 1, f"round {round_no}"
    with Turnlog(db) as engine:
        sessions = engine.sessions()
        routes = engine.routes()
    assert len(sessions) == ROUNDS
    assert {s.session_id for s in sessions} == {ids[0] for ids in ids_by_round.values()}
    assert {r.session_key: r.session_id for r in routes} == {
        s.session_key: s.session_id for s in sessions}
