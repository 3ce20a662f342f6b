"""Times to log positions (`at(ISO)`, `history(since=ISO)`) through the timeline's clock, checked
against every event's own time read from the log, including clocks that went backwards and
times stored with and without microseconds."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta

import orjson
import pytest

from turnlog.storage.event_compressor import inflate

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog

SOURCE = SessionSource(platform="telegram", chat_type="dm", chat_id="7", user_id="7")
KEY = "agent:main:telegram:dm:7"
START = datetime.fromisoformat("2026-05-01T08:00:00+00:00")


def event_times(db: str) -> list[tuple[int, datetime]]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT rowid, state FROM stored_events ORDER BY rowid").fetchall()
    finally:
        conn.close()
    return [(p, datetime.fromisoformat(orjson.loads(inflate(s))["timestamp"]["_data_"])) for p, s in rows]


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("clock") / "t.db")
    clock = ManualClock(START)
    with Turnlog(db, clock=clock, session_ids=SequentialIds()) as t:
        for n in range(120):  # about 1,500 events: more than one clock block of 1024 positions
            if n == 60:
                clock.set(START + timedelta(seconds=30))  # a clock that went back 30 minutes' worth
            clock.advance(1 if n % 2 else 1.000123)  # times without, then with, microseconds
            t.handle_message(SOURCE, f"message {n}", lambda history, item: "ok", lambda text: None)
    return db


def test_the_log_spans_two_clock_blocks_and_its_times_go_backwards(log):
    times = event_times(log)
    assert len(times) > 1024
    assert any(later < earlier for (_, earlier), (_, later) in zip(times, times[1:]))


@pytest.mark.parametrize("offset", [0, 0.5, 1, 29.9, 30, 31.000123, 45, 61.5, 95, 119.9, 200, -5])
def test_a_time_gives_the_last_position_at_or_before_it_and_the_first_at_or_after_it(log, offset):
    moment = START + timedelta(seconds=offset)
    times = event_times(log)
    before = max((p for p, at in times if at <= moment), default=0)
    after = min((p for p, at in times if at >= moment), default=None)
    with Turnlog(log) as t:
        if before:
            assert t.at(moment.isoformat()).position == before
        since = t.history(KEY, since=moment.isoformat())
        every = t.history(KEY)
    assert since == [h for h in every if after is not None and h.position >= after]
