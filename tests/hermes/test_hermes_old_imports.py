"""Logs imported before issue 19 (MessagesImported and HermesSessionImported version 1) still read:
tests/data/hermes-import-v1-message-times.db (tests/data/README.md). Version 1 gave every message of a run
the run's time and kept session_meta markers in the transcript; the upcasters say so, and an
export writes the same rows back."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from turnlog import ManualClock, SequentialIds, Turnlog

OLD_DB = Path(__file__).parents[1] / "data" / "hermes-import-v1-message-times.db"
TG_DM_2 = "20261105_210210_ae4d6fdf"
IMPORTED_AT = "2026-12-01T00:00:00+00:00"


def test_an_old_import_reads_rebuilds_and_exports(tmp_path) -> None:
    db = tmp_path / "old.db"
    shutil.copy(OLD_DB, db)
    with Turnlog(str(db), clock=ManualClock("2026-12-02T00:00:00+00:00"), session_ids=SequentialIds()) as t:
        assert t.maintenance.verify()["ok"]
        transcript = t.transcript(TG_DM_2)
        assert [m["role"] for m in transcript] == ["user", "assistant", "session_meta", "user", "assistant"]
        assert {m["timestamp"] for m in transcript} == {IMPORTED_AT}  # version 1: the run's time
        history = [e for e in t.history(TG_DM_2) if e.event == "MessageAppended"]
        assert {e.data["message_at"] for e in history} == {IMPORTED_AT}
        t.export_hermes(tmp_path / "out")
    rows = sqlite3.connect(tmp_path / "out" / "state.db").execute(
        "SELECT id, role, content FROM messages WHERE session_id=? ORDER BY id", (TG_DM_2,)).fetchall()
    assert [r[1] for r in rows] == ["user", "assistant", "session_meta", "user", "assistant"]
    assert rows[2][2] is None  # the marker's NULL content comes back as NULL
