"""Retention and archive through the public API: sessions out to an archive file and back, the
same transcripts, history and search hits, the chain verifying across the hole, the file shrinking."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zipfile
from datetime import timedelta

import pytest

from turnlog import EngineConfig, InvalidRequest, Retention, StoreError, Turnlog

from chat import BOB, alice, collect, echo
from sqlite_files import checkpoint


def noise(i: int) -> str:
    """Text that compresses badly (as real conversation does, unlike repeated letters)."""
    return "".join(hashlib.sha256(f"{i}:{n}".encode()).hexdigest() for n in range(12))


def talk(t: Turnlog, turns: int, word: str = "unicorn") -> None:
    sent: list[str] = []
    for i in range(turns):
        t.handle_message(alice(f"{word}{i}"), f"hello {word} {i} {noise(i)}", echo, collect(sent))


@pytest.fixture
def old_session(t, clock) -> str:
    """Alice's first session (30 turns), reset, then a fresh one and Bob's; 100 days later."""
    talk(t, 30)
    first = t.session(alice()).session_id
    t.command(alice("reset"), "/reset")
    talk(t, 2, word="later")
    t.handle_message(BOB, "bob here", echo, collect([]))
    clock.advance(days=100)
    return first


def snapshot(t: Turnlog, session_id: str) -> dict:
    return {"transcript": t.transcript(session_id),
            "agent": [m.content for m in t.turns.agent_history(session_id)],
            "history": [h.to_dict() for h in t.history(session_id)],
            "search": [h.to_dict() for h in t.search("unicorn")]}


def main_file_bytes(db: str) -> int:
    checkpoint(db)
    return os.path.getsize(db)


def test_archive_then_restore_gives_back_the_same_transcripts_history_and_search(t, old_session, tmp_path):
    before = snapshot(t, old_session)
    assert before["search"] and len(before["transcript"]) == 60
    report = t.archive(tmp_path / "old.tlar")
    assert [c.session_id for c in report.sessions] == [old_session]
    assert report.sessions[0].rule == "ended" and report.events > 60
    assert t.transcript(old_session) == [] and t.search("unicorn") == []
    assert not t.maintenance.verify_chain().breaks
    assert t.maintenance.verify()["ok"]  # the read models are what a rebuild from the log gives

    restored = t.restore_archive(tmp_path / "old.tlar")
    assert (restored.sessions, restored.events, restored.already_restored) == ([old_session], report.events, False)
    after = snapshot(t, old_session)
    assert after["transcript"] == before["transcript"]
    assert after["agent"] == before["agent"]
    assert after["search"] == before["search"]
    n = len(before["history"])
    assert after["history"][:n] == before["history"]
    assert [h["event"] for h in after["history"][n:]] == ["SessionArchived", "SessionRestored"]
    assert not t.maintenance.verify_chain().breaks
    assert t.maintenance.verify()["ok"]
    assert not t.session(old_session).archived


def test_an_archived_session_is_listed_as_archived_never_missing(t, old_session, tmp_path):
    report = t.archive(tmp_path / "old.tlar")
    row = t.session(old_session)
    assert row.archived and row.archive_sha256 == report.sha256
    assert row.archive_file == str(tmp_path / "old.tlar")
    assert old_session in [s.session_id for s in t.sessions()]
    last = t.history(old_session)[-1]
    assert last.event == "SessionArchived" and last.summary.startswith(f"archived in {tmp_path / 'old.tlar'} sha256 ")


def test_the_database_file_shrinks_after_an_archive(t, old_session, tmp_path, db):
    t.maintenance.catch_up()
    before = main_file_bytes(db)
    report = t.archive(tmp_path / "old.tlar")
    t.close()  # no reader of this process left to hold the checkpoint back
    after = main_file_bytes(db)
    assert after < before * 0.75, (before, after)  # the rest is the schema of ~30 tables and the live sessions
    assert report.db_bytes_after < report.db_bytes_before


def test_a_dry_run_changes_nothing(t, old_session, tmp_path, db):
    head = t.maintenance.log_head()
    report = t.archive(tmp_path / "old.tlar", dry_run=True)
    assert report.dry_run and [c.session_id for c in report.sessions] == [old_session]
    assert [c.session_id for c in t.archivable()] == [old_session]
    assert not (tmp_path / "old.tlar").exists()
    assert t.maintenance.log_head() == head and len(t.transcript(old_session)) == 60


def test_sessions_that_own_a_key_or_are_recent_stay(t, clock, tmp_path):
    talk(t, 2)
    clock.advance(days=400)
    assert t.archivable() == []  # alice's session owns her key, however idle
    t.command(alice("reset"), "/reset")
    assert t.archivable(older_than="90d") == []  # ended just now
    clock.advance(days=91)
    assert [c.rule for c in t.archivable(older_than="90d")] == ["ended"]
    assert t.archivable(older_than=timedelta(days=120)) == []


def test_a_bad_duration_is_refused(t):
    with pytest.raises(InvalidRequest, match="not a duration"):
        t.archivable(older_than="ninety days")


def test_a_second_restore_of_the_same_file_does_nothing(t, old_session, tmp_path):
    t.archive(tmp_path / "old.tlar")
    t.restore_archive(tmp_path / "old.tlar")
    head = t.maintenance.log_head()
    again = t.restore_archive(tmp_path / "old.tlar")
    assert again.already_restored and t.maintenance.log_head() == head


def test_a_damaged_archive_is_refused_and_nothing_changes(t, old_session, tmp_path):
    path = tmp_path / "old.tlar"
    t.archive(path)
    damaged = tmp_path / "damaged.tlar"
    damaged.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(StoreError, match="not a readable turnlog archive"):
        t.restore_archive(damaged)
    with pytest.raises(InvalidRequest, match="no archive file"):
        t.restore_archive(tmp_path / "missing.tlar")
    assert t.session(old_session).archived


def test_an_archive_with_an_edited_event_is_refused(t, old_session, tmp_path):
    path = tmp_path / "old.tlar"
    t.archive(path)
    with zipfile.ZipFile(path) as z:
        manifest = json.loads(z.read("manifest.json"))
        lines = [json.loads(line) for line in z.read("events.jsonl").splitlines()]
    message = next(e for e in lines if e["topic"] == "turnlog:MessageAppended")
    stored = json.loads(json.dumps(message["event"]))
    stored["content"] = "forged"
    message["stored"] = base64.b64encode(json.dumps(stored).encode()).decode()
    payload = b"".join(json.dumps(e).encode() + b"\n" for e in lines)
    manifest["payload_sha256"] = hashlib.sha256(payload).hexdigest()
    for s in manifest["sessions"]:  # a forger who also fixed the digests
        s["digest"] = _digest([e for e in lines if any(a <= e["position"] <= b for a, b in s["positions"])])
    path.unlink()
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("manifest.json", json.dumps(manifest))
        z.writestr("events.jsonl", payload)
    with pytest.raises(InvalidRequest, match="was never recorded here"):  # its sha256 is not the one archived
        t.restore_archive(path)
    assert t.session(old_session).archived


def _digest(lines: list[dict]) -> str:
    h = hashlib.sha256()
    for e in lines:
        h.update(f"{e['position']}|{e['originator_id']}|{e['originator_version']}|{e['topic']}|".encode())
        h.update(base64.b64decode(e["stored"]))
    return h.hexdigest()


def archived_events(path) -> tuple[dict, list[dict]]:
    with zipfile.ZipFile(path) as z:
        manifest = json.loads(z.read("manifest.json"))
        events = [json.loads(line) for line in z.read("events.jsonl").splitlines()]
    return manifest, events


def test_the_archive_is_readable_without_turnlog(make_turnlog, clock, tmp_path):
    t = make_turnlog(encryption=False)
    talk(t, 3)
    first = t.session(alice()).session_id
    t.command(alice("reset"), "/reset")
    clock.advance(days=100)
    report = t.archive(tmp_path / "old.tlar")
    manifest, events = archived_events(tmp_path / "old.tlar")
    assert manifest["format"] == "turnlog-archive" and manifest["event_count"] == report.events == len(events)
    assert [s["session_id"] for s in manifest["sessions"]] == [first]
    texts = [e["event"]["content"] for e in events if e["topic"] == "turnlog:MessageAppended"]
    assert texts[0].startswith("hello unicorn 0 ")


def test_an_encrypted_logs_archive_keeps_the_text_sealed(t, old_session, tmp_path):
    t.archive(tmp_path / "old.tlar")
    _, events = archived_events(tmp_path / "old.tlar")
    contents = [e["event"]["content"] for e in events if e["topic"] == "turnlog:MessageAppended"]
    assert contents and all(set(c) == {"_sealed_", "_v_"} for c in contents)
    with zipfile.ZipFile(tmp_path / "old.tlar") as z:
        assert b"hello unicorn" not in z.read("events.jsonl")  # the words; message ids stay (operations.md)


def test_a_message_on_an_archived_sessions_key_starts_a_new_session(make_turnlog, clock, tmp_path):
    t = make_turnlog()
    talk(t, 2)
    first = t.session(alice()).session_id
    t.suspend(alice())
    clock.advance(days=100)
    assert [c.session_id for c in t.archivable(older_than="90d")] == [first]
    t.archive(tmp_path / "old.tlar", older_than="90d")
    result = t.get_or_create_session(alice())
    assert result.created and result.reason == "archived" and result.session_id != first
    assert t.session(first).archived


def test_with_the_restore_policy_a_message_on_its_key_brings_the_archive_back(make_turnlog, clock, tmp_path):
    t = make_turnlog(config=EngineConfig(retention=Retention(archived_key_policy="restore")))
    talk(t, 2)
    first = t.session(alice()).session_id
    t.suspend(alice())
    clock.advance(days=100)
    t.archive(tmp_path / "old.tlar", older_than="90d")
    result = t.get_or_create_session(alice())
    assert result.created and result.session_id != first  # it had ended: the key gets a new session
    assert not t.session(first).archived and len(t.transcript(first)) == 4
    assert not t.maintenance.verify_chain().breaks


def test_another_process_sees_the_archive_and_cannot_write_to_an_archived_session(make_turnlog, clock, tmp_path):
    t = make_turnlog()
    other = make_turnlog()
    talk(t, 2)
    first = t.session(alice()).session_id
    assert other.get_or_create_session(alice()).session_id == first  # its cache holds the live session
    t.suspend(alice())
    clock.advance(days=100)
    t.archive(tmp_path / "old.tlar", older_than="90d")
    assert other.session(first).archived and other.transcript(first) == []
    # Its stale copy would touch the archived session; the log refuses that write as a conflict.
    result = other.get_or_create_session(alice())
    assert result.session_id != first and result.reason == "archived"
    assert not other.maintenance.verify_chain().breaks
    assert t.restore_archive(tmp_path / "old.tlar").sessions == [first]
    assert len(t.transcript(first)) == 4


def test_a_restore_reports_its_progress_step_by_step(t, old_session, tmp_path):
    t.archive(tmp_path / "old.tlar")
    steps: list[tuple[int, int]] = []
    report = t.restore_archive(tmp_path / "old.tlar", progress=lambda done, total: steps.append((done, total)))
    assert steps == [(1, 3), (2, 3), (3, 3)] and not report.already_restored
    assert t.session(old_session).archived is False


def interrupt_at(step: int):
    def progress(done: int, total: int) -> None:
        if done == step:
            raise KeyboardInterrupt  # Ctrl-C at that moment
    return progress


def test_an_archive_interrupted_before_its_commit_leaves_no_file_and_a_second_run_archives(t, old_session, tmp_path):
    out = tmp_path / "old.tlar"
    before = snapshot(t, old_session)
    with pytest.raises(KeyboardInterrupt):
        t.archive(out, progress=interrupt_at(1))  # the file written and read back, the log not changed
    assert not [name for name in os.listdir(tmp_path) if "tlar" in name]  # neither the file nor a temporary
    assert not t.session(old_session).archived and snapshot(t, old_session) == before
    assert [c.session_id for c in t.archive(out).sessions] == [old_session]


def test_an_archive_interrupted_after_its_commit_keeps_its_file(t, old_session, tmp_path):
    out = tmp_path / "old.tlar"
    with pytest.raises(KeyboardInterrupt):
        t.archive(out, progress=interrupt_at(2))  # committed: the file holds the only copy of the events
    assert out.exists() and t.session(old_session).archived
    assert t.restore_archive(out).sessions == [old_session]
