"""Stored events are zstd against dictionary v2 now; what older versions stored stays readable.

`tests/data/log-deflate-v1-events.db` is a log written by turnlog a0c9696 (tests/data/make_deflate_v1_log.py):
the demo's events of ~30 kinds stored as plain JSON, then 60 turns on one key stored deflate-v1,
with v1 snapshots. Only its log is there; the read models rebuild from it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.cli import main
from turnlog.storage import event_compressor
from turnlog.storage.event_compressor import V1, V2, compact, inflate

OLD_LOG = Path(__file__).parents[1] / "data" / "log-deflate-v1-events.db"
OLD_KEY = "agent:main:telegram:dm:4242"


def tags(db: Path, table: str = "stored_events") -> dict[bytes, int]:
    c = sqlite3.connect(db)
    try:
        counts: dict[bytes, int] = {}
        for (state,) in c.execute(f"SELECT state FROM {table}"):
            counts[state[:1]] = counts.get(state[:1], 0) + 1
        return counts
    finally:
        c.close()


def states_by_topic(db: Path) -> dict[str, list[bytes]]:
    c = sqlite3.connect(db)
    try:
        found: dict[str, list[bytes]] = {}
        for topic, state in c.execute("SELECT topic, state FROM stored_events ORDER BY rowid"):
            found.setdefault(topic, []).append(state)
        return found
    finally:
        c.close()


def cli(db: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["--db", str(db), *args])
    assert result.exit_code == 0, result.output
    return result.output


def turns(db: Path, first: int, count: int) -> None:
    with Turnlog(db, clock=ManualClock("2026-03-02T10:00:00+00:00"), session_ids=SequentialIds(), owner="new") as t:
        for n in range(first, first + count):
            source = SessionSource(platform="telegram", chat_type="dm", chat_id="4242", user_id="4242",
                                   message_id=f"new{n}")
            t.handle_message(source, f"new message {n}", lambda history, item: f"new reply to {item.text}",
                             lambda text: None)


@pytest.fixture
def old_log(tmp_path: Path) -> Path:
    db = tmp_path / "old.db"
    shutil.copy(OLD_LOG, db)
    return db


def test_the_old_log_holds_plain_json_and_deflate_v1_events_and_snapshots() -> None:
    # What the tests below rely on: both old forms are really in the fixture.
    assert set(tags(OLD_LOG)) == {b"{", V1}
    assert set(tags(OLD_LOG, "stored_snapshots")) == {V1}
    assert len(states_by_topic(OLD_LOG)) >= 25


def test_a_log_written_by_a0c9696_is_read_verified_and_extended_in_v2(old_log: Path) -> None:
    assert cli(old_log, "verify", "--chain").strip() == "chain: ok"
    with Turnlog(old_log) as t:
        messages = t.transcript(t.session(OLD_KEY).session_id)
        assert len(t.sessions()) == 12
    assert len(messages) == 120
    assert messages[-1]["content"] == "old reply to old message 59"

    turns(old_log, 0, 3)  # loads the session, its lease and inbox from their v1 snapshots

    counts = tags(old_log)
    assert counts[V2] >= 3 * 11 and counts[V1] == 844 and counts[b"{"] == 117
    assert cli(old_log, "verify", "--chain").strip() == "chain: ok"
    cli(old_log, "verify")  # every read model rebuilt from the whole log matches
    with Turnlog(old_log) as t:
        assert [m["content"] for m in t.transcript(t.session(OLD_KEY).session_id)[-2:]] == ["new message 2", "new reply to new message 2"]
        assert len(t.transcript(t.session(OLD_KEY).session_id)) == 126
    history = json.loads(cli(old_log, "history", OLD_KEY, "--json"))
    assert any("new message 2" in json.dumps(row) for row in history)
    assert any("old message 0" in json.dumps(row) for row in history)


def test_every_event_kind_round_trips_through_v2() -> None:
    for topic, states in states_by_topic(OLD_LOG).items():
        for state in states[:20]:
            plain = inflate(state)
            assert plain.startswith(b"{"), topic
            packed = compact(plain)
            assert packed[:1] == V2 and len(packed) < len(plain), topic
            assert inflate(packed) == plain, topic


def test_a_new_log_is_written_in_v2_events_and_snapshots_and_verifies(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    cli(db, "demo")
    turns(db, 0, 60)  # past the 100th version of the session: a snapshot
    assert set(tags(db)) == {V2}
    assert set(tags(db, "stored_snapshots")) == {V2}
    assert cli(db, "verify", "--chain").strip() == "chain: ok"
    cli(db, "verify")
    with Turnlog(db) as t:  # loaded from its v2 snapshot
        assert len(t.transcript(t.session(OLD_KEY).session_id)) == 120


def test_compaction_off_still_writes_plain_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNLOG_COMPACT_EVENTS", "0")
    db = tmp_path / "plain.db"
    turns(db, 0, 2)
    assert set(tags(db)) == {b"{"}
    monkeypatch.setenv("TURNLOG_COMPACT_EVENTS", "1")
    turns(db, 2, 1)
    assert set(tags(db)) == {b"{", V2}
    with Turnlog(db) as t:
        assert [m["content"] for m in t.transcript(t.session(OLD_KEY).session_id)][::2] == [f"new message {n}" for n in range(3)]


def test_the_shipped_dictionary_is_the_one_v2_events_were_written_with() -> None:
    data = (Path(event_compressor.__file__).parent / event_compressor.DICTIONARY_V2_FILE).read_bytes()
    assert hashlib.sha256(data).hexdigest() == event_compressor.DICTIONARY_V2_SHA256
    # a frozen v2 state: the dictionary, level and frame format may never change under it
    frozen = bytes.fromhex(FROZEN_V2_HEX)
    assert inflate(frozen) == FROZEN_PLAIN


FROZEN_PLAIN = b'{"timestamp":{"_type_":"datetime_iso","_data_":"2026-03-02T10:00:00.000000+00:00"},"actor":"new","cause":"inbound:1","epoch":1,"outcome":"completed"}'
FROZEN_V2_HEX = "0220951d0100c340026050582866c6d0201907fc1e470155b38c386d6288757541014064b0b50fc207"
