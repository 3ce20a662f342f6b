"""Hermes' sessions.title and SessionTitled: the importer turns each title into an event (a title
this log already gives another session is reported and left in the import record); export-hermes
writes the log's titles back, under state.db's unique index."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from harness.hermes_home import fixture_home

from turnlog import EngineConfig, ManualClock, SequentialIds, SessionSource, Turnlog
from chat import echo

HOME = fixture_home()
LID_DIR = str(HOME / "platforms" / "whatsapp" / "session")
KYOTO = "20261103_130500_875d257a"
KYOTO_2 = "20261110_183000_9ea972"
CAROL = SessionSource(platform="telegram", chat_type="dm", chat_id="9001", user_id="9001")


def engine(path: Path) -> Turnlog:
    return Turnlog(str(path), clock=ManualClock("2026-12-01T00:00:00+00:00"), session_ids=SequentialIds(),
                   config=EngineConfig(whatsapp_aliases=LID_DIR))


def hermes_titles(db_path: Path) -> dict[str, str | None]:
    db = sqlite3.connect(db_path)
    try:
        return dict(db.execute("SELECT id, title FROM sessions"))
    finally:
        db.close()


def test_imported_titles_are_session_titled_events(tmp_path):
    with engine(tmp_path / "t.db") as t:
        t.import_hermes(HOME)

        titles = {s.session_id: s.title for s in t.sessions()}
        assert titles == hermes_titles(HOME / "state.db")
        assert titles[KYOTO] == "Kyoto trip planning" and titles[KYOTO_2] == "Kyoto trip planning #2"
        [event] = [h for h in t.history(KYOTO) if h.event == "SessionTitled"]
        assert event.actor == "import:hermes" and event.data["previous_title"] is None
        assert [s.session_id for s in t.sessions(title="kyoto")] == [KYOTO, KYOTO_2]


def test_a_title_the_log_already_holds_is_reported_not_imported(tmp_path):
    with engine(tmp_path / "t.db") as t:
        mine = t.handle_message(CAROL, "hi", echo, lambda text: None)[0].session_id
        t.set_title(mine, "Kyoto trip planning")

        report = t.import_hermes(HOME)

        assert t.title(mine) == "Kyoto trip planning" and t.title(KYOTO) is None
        reason = "Title 'Kyoto trip planning' is already in use by another session: kept in the import record"
        assert {"what": f"title of session {KYOTO}", "reason": reason} in report.skipped


def test_export_writes_the_logs_titles_back(tmp_path):
    with engine(tmp_path / "t.db") as t:
        t.import_hermes(HOME)
        t.set_title(KYOTO, "Kyoto, revised")
        native = t.handle_message(CAROL, "hi", echo, lambda text: None)[0].session_id
        t.command(CAROL, "/title Carol's plans")
        branch = t.command(CAROL, "/branch").session_id

        t.export_hermes(tmp_path / "home")

        titles = hermes_titles(tmp_path / "home" / "state.db")
        assert titles[KYOTO] == "Kyoto, revised" and titles[KYOTO_2] == "Kyoto trip planning #2"
        assert titles[native] == "Carol's plans" and titles[branch] == "Carol's plans #2"
        with engine(tmp_path / "again.db") as again:
            again.import_hermes(tmp_path / "home")
            assert {s.session_id: s.title for s in again.sessions()} == {s.session_id: s.title for s in t.sessions()}


def test_a_log_imported_before_titles_were_events_exports_the_records_titles(tmp_path):
    import shutil
    db = tmp_path / "old.db"
    shutil.copy(Path(__file__).parents[1] / "data" / "hermes-import-v1-message-times.db", db)
    with Turnlog(str(db), clock=ManualClock("2026-12-02T00:00:00+00:00"), session_ids=SequentialIds()) as t:
        assert all(s.title is None for s in t.sessions())  # no SessionTitled events in that log
        t.set_title(t.handle_message(CAROL, "hi", echo, lambda text: None)[0].session_id, "Kyoto trip planning")
        t.export_hermes(tmp_path / "out")

    titles = hermes_titles(tmp_path / "out" / "state.db")
    originals = {k: v for k, v in hermes_titles(HOME / "state.db").items() if k in titles}
    assert any(originals.values())
    assert {k: v for k, v in titles.items() if k in originals and v != "Kyoto trip planning"} == \
        {k: v for k, v in originals.items() if v != "Kyoto trip planning"}
    assert list(titles.values()).count("Kyoto trip planning") == 1  # the unique index allows one
