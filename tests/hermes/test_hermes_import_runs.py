"""An import writes a session's messages as a few MessagesImported runs, not one event per row;
every reader sees the run as the messages it holds (transcript slices, search, history, time
travel, fork, the next turn)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from harness.hermes_home import copy_home, fixture_home

from turnlog import EngineConfig, ManualClock, SequentialIds, SessionSource, Turnlog

HOME = fixture_home()
LID_DIR = str(HOME / "platforms" / "whatsapp" / "session")
SESSION = "20261105_210210_ae4d6fdf"  # tg_dm_2: 5 live rows, routed from KEY
KEY = "agent:main:telegram:dm:5512345678"
ADDED = 1200


def engine(path: Path) -> Turnlog:
    return Turnlog(str(path), clock=ManualClock("2026-12-01T00:00:00+00:00"), session_ids=SequentialIds(),
                   config=EngineConfig(whatsapp_aliases=LID_DIR))


def long_home(tmp_path: Path, contents: list[str]) -> tuple[Path, list[str]]:
    """The fixture with `contents` appended to SESSION as rows; returns the home and the
    session's live contents in id order."""
    home = copy_home(tmp_path / "home")
    db = sqlite3.connect(home / "state.db")
    with db:
        last = db.execute("SELECT max(timestamp) FROM messages WHERE session_id=?", (SESSION,)).fetchone()[0]
        db.executemany("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?,?,?,?)",
                       [(SESSION, "user" if i % 2 == 0 else "assistant", text, last + i + 1)
                        for i, text in enumerate(contents)])
        live = [r[0] or "" for r in db.execute(
            "SELECT content FROM messages WHERE session_id=? AND active=1 AND role != 'session_meta'"
        " ORDER BY id", (SESSION,))]
    db.close()
    return home, live


def exported_messages(path: Path) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT id, session_id, role, content, tool_calls, timestamp FROM messages"
                          " ORDER BY id").fetchall()
    finally:
        db.close()


def origin() -> SessionSource:
    return SessionSource(platform="telegram", chat_type="dm", chat_id="5512345678", user_id="5512345678",
                         message_id="m-next")


def test_a_long_session_is_imported_as_runs_of_at_most_500_messages(tmp_path) -> None:
    home, live = long_home(tmp_path, [f"message tok{i} ночь" for i in range(ADDED)])
    with engine(tmp_path / "t.db") as t:
        report = t.import_hermes(home)
        assert report.messages_imported == \
            report.messages_found - report.inactive_rows_kept - report.marker_rows_kept
        transcript = t.transcript(SESSION)
        assert [m["content"] for m in transcript] == live
        assert [m["seq"] for m in transcript] == list(range(1, len(live) + 1))
        assert {m["actor"] for m in transcript} == {"import:hermes"}
        appended = t.history(SESSION, types=["MessageAppended"])
        assert [e.data["content"] for e in appended] == [c if len(c) <= 80 else c[:80] + "…" for c in live]
        runs = sorted({e.position for e in appended})
        assert len(runs) == -(-len(live) // 500)  # 1205 messages: 500 + 500 + 205
        assert [sum(e.position == p for e in appended) for p in runs] == [500, 500, len(live) - 1000]
        # search files every message of a run under its own row, at the run's position
        for i, run in ((0, runs[0]), (700, runs[1]), (1111, runs[2])):
            hits = t.search(f"tok{i}", session=SESSION)
            assert [(h.seq, h.position) for h in hits] == [(len(live) - ADDED + i + 1, run)]
        assert len(t.search("ночь", session=SESSION, role="user", limit=1000)) == ADDED // 2
        # time travel counts messages by run
        assert len(t.at(f"#{runs[0]}").transcript(SESSION)) == 500
        assert t.diff(f"#{runs[0]}", f"#{runs[1]}")["sessions"][SESSION]["messages_added"] == 500


def test_a_slice_of_a_transcript_reads_across_runs(tmp_path) -> None:
    home, live = long_home(tmp_path, [f"row {i}" for i in range(ADDED)])
    with engine(tmp_path / "t.db") as t:
        t.import_hermes(home)
        every = t.turns.transcript(SESSION)
        assert [m.content for m in every] == live
        for after, upto in ((None, 499), (None, 500), (None, 501), (498, 503), (499, 1000), (1000, None), (0, 1)):
            got = [m.originator_version for m in t.turns.transcript(SESSION, after=after, upto=upto)]
            want = [m.originator_version for m in every if (after or 0) < m.originator_version <= (upto or 10**9)]
            assert got == want, (after, upto)
        newest = t.turns.transcript(SESSION, newest_first=True, limit=30, upto=510)
        assert [m.originator_version for m in newest] == list(range(510, 480, -1))
        oldest = t.turns.transcript(SESSION, after=495, limit=10)
        assert [m.originator_version for m in oldest] == list(range(496, 506))


def test_a_fork_inside_an_imported_transcript_copies_its_messages(tmp_path) -> None:
    home, live = long_home(tmp_path, [f"row {i}" for i in range(ADDED)])
    with engine(tmp_path / "t.db") as t:
        t.import_hermes(home)
        second_run = sorted({e.position for e in t.history(SESSION, types=["MessageAppended"])})[1]
        fork_id = t.fork(SESSION, f"#{second_run}")
        assert [m["content"] for m in t.transcript(fork_id)] == live[:1000]


def test_a_turn_after_a_long_import_continues_after_the_last_run(tmp_path) -> None:
    home, live = long_home(tmp_path, [f"row {i}" for i in range(ADDED)])
    with engine(tmp_path / "t.db") as t:
        t.import_hermes(home)
        seen: list[list[str]] = []
        t.handle_message(origin(), "next", lambda history, item: seen.append([m.content for m in history]) or "ok",
                         lambda text: None)
        assert seen == [live + ["next"]]
        transcript = t.transcript(SESSION)
        assert [m["seq"] for m in transcript] == list(range(1, len(live) + 3))
        assert [m["content"] for m in transcript[-3:]] == [live[-1], "next", "ok"]
        # a slice across the import's last run and the turn's own MessageAppended events
        assert [m.content for m in t.turns.transcript(SESSION, after=len(live) - 2, upto=len(live) + 1)] \
            == live[-2:] + ["next"]


def test_big_messages_split_runs_at_256_kib(tmp_path) -> None:
    big = ["x" * (100 * 1024) + str(i) for i in range(5)]
    home, live = long_home(tmp_path, big)
    with engine(tmp_path / "t.db") as t:
        t.import_hermes(home)
        assert [m["content"] for m in t.transcript(SESSION)] == live
        appended = t.history(SESSION, types=["MessageAppended"])
        runs = sorted({e.position for e in appended})
        # the 4 fixture messages (5 rows, one a session_meta marker) and two big ones, two big ones, the last one
        assert [sum(e.position == p for e in appended) for p in runs] == [6, 2, 1]


def test_a_reimport_of_a_long_session_is_a_no_op(tmp_path) -> None:
    home, live = long_home(tmp_path, [f"row {i}" for i in range(ADDED)])
    with engine(tmp_path / "t.db") as t:
        t.import_hermes(home)
        again = t.import_hermes(home)
        assert again.nothing_to_do and again.sessions_imported == 0
        assert len(t.transcript(SESSION)) == len(live)


def test_a_log_imported_before_runs_reads_the_same(tmp_path) -> None:
    """Logs written before runs hold one MessageAppended per imported row: they read as before."""
    from turnlog.domain.transcript import MessagesImported, imported_messages

    home, _ = long_home(tmp_path, [f"row {i} ночь" for i in range(ADDED)])
    with engine(tmp_path / "runs.db") as new, engine(tmp_path / "rows.db") as old:
        new.import_hermes(home)
        app = new._app
        stored = app.recorder.select_notifications(start=1, limit=1_000_000)
        events = [app.mapper.to_domain_event(n) for n in stored]
        assert any(type(e) is MessagesImported for e in events)
        old._ctx.save(*[m for e in events
                       for m in (imported_messages(e) if type(e) is MessagesImported else [e])])
        assert not any(type(old._app.mapper.to_domain_event(n)) is MessagesImported
                       for n in old._app.recorder.select_notifications(start=1, limit=1_000_000))
        assert [s.session_id for s in old.sessions()] == [s.session_id for s in new.sessions()]
        for s in new.sessions():
            assert old.transcript(s.session_id) == new.transcript(s.session_id), s["session_id"]
        for query in ("ночь", "东京", "row 1111"):
            assert [(h.session_id, h.seq, h.snippet) for h in old.search(query)] == \
                [(h.session_id, h.seq, h.snippet) for h in new.search(query)]
        assert [(e.event, e.summary, e.cause) for e in old.history(SESSION)] == \
            [(e.event, e.summary, e.cause) for e in new.history(SESSION)]
        old.export_hermes(tmp_path / "old-home")
        new.export_hermes(tmp_path / "new-home")
        dump = [exported_messages(tmp_path / name / "state.db") for name in ("old-home", "new-home")]
        assert dump[0] == dump[1] and len(dump[0]) > ADDED
