"""Erase (crypto-shredding): the subject's data key destroyed, SubjectErased recorded without its
id, and its words gone from every byte of the database, its write-ahead log, the read models
and a backup made afterwards, while the log and its hash chain still verify; every reader
shows "[erased]"; the subject's next message starts a new session; a group's other
participants keep their text."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

from turnlog import EngineConfig, InvalidRequest, SessionSource, Turnlog

from sqlite_files import checkpoint
from chat import alice, collect, echo

PHRASE = "marmalade lighthouse 7731"


def bytes_of(*paths: str) -> bytes:
    return b"".join(Path(p).read_bytes() for p in paths if os.path.isfile(p))


def group(user: str) -> SessionSource:
    return SessionSource(platform="telegram", chat_type="group", chat_id="-100", user_id=user, user_name=f"n{user}",
                         chat_name="the group")


def test_an_erased_phrase_is_in_no_byte_of_the_database_its_wal_or_a_later_backup(make_turnlog, db, tmp_path):
    t = make_turnlog()
    t.handle_message(alice(user_name="marmaladefan"), PHRASE, echo, collect([]))
    t.handle_message(SessionSource(platform="telegram", chat_type="dm", chat_id="43", user_id="43"), "other words",
                     echo, collect([]))
    assert t.search("marmalade")  # indexed
    assert PHRASE.encode() in bytes_of(db, db + "-wal")  # the read models held it in plaintext
    report = t.erase_subject("telegram:42", actor="operator", cause="erase request")
    assert report.keys == 1 and len(report.sessions) == 1
    backup = str(tmp_path / "after.db")
    t.backup(backup)
    checkpoint(db)
    files = [db, db + "-wal", backup, *glob.glob(str(tmp_path / "*.db*"))]
    for needle in (PHRASE.encode(), b"marmalade", b"marmaladefan"):
        assert needle not in bytes_of(*files), needle
    assert t.maintenance.verify_chain().breaks == []
    assert t.maintenance.verify()["ok"]
    assert t.search("marmalade") == [] and t.search("other")


def test_subject_erased_names_the_subject_only_by_its_keyed_hash(make_turnlog, db):
    t = make_turnlog()
    t.handle_message(alice(), PHRASE, echo, collect([]))
    dry = t.erase_subject("telegram:42", actor="operator", cause="dry", dry_run=True)
    assert dry.keys == 1 and dry.position is None and t.transcript(dry.sessions[0])[0]["content"] == PHRASE
    report = t.erase_subject("telegram:42", actor="operator", cause="erase request")
    event = next(e for e in t.events_around(report.position, before=0, after=0) if e.position == report.position)
    assert event.event == "SubjectErased" and report.subject_hash in event.summary
    assert "42" not in event.summary.replace(report.subject_hash, "")  # the hash's hex may hold "42" by chance
    assert (event.actor, event.cause) == ("operator", "erase request")
    with pytest.raises(InvalidRequest):
        t.erase_subject("no-platform", actor="operator", cause="x")


def test_every_reader_shows_erased_and_nothing_fails_to_load(make_turnlog, tmp_path):
    t = make_turnlog()
    t.handle_message(alice(user_name="alice"), PHRASE, echo, collect([]))
    session_id = t.session(alice()).session_id
    report = t.erase_subject("telegram:42", actor="operator", cause="erase request")
    assert [m["content"] for m in t.transcript(session_id)] == ["[erased]", "[erased]"]
    row = t.session(session_id)
    assert row.origin["user_id"] == "[erased]" and row.origin.get("user_name") in ("[erased]", None)
    exported = t.export(session_id)
    assert PHRASE not in str(exported) and "[erased]" in str(exported)
    assert PHRASE not in str([e.to_dict() for e in t.history(session_id)])
    assert PHRASE not in str(t.at("#3").sessions())
    head = report.position - 1
    assert [m["content"] for m in t.at(f"#{head}").agent_history(session_id)] == ["[erased]", "[erased]"]
    assert PHRASE not in str(t.diff("#1", f"#{head}"))
    t.export_hermes(str(tmp_path / "home"))
    assert PHRASE.encode() not in bytes_of(*glob.glob(str(tmp_path / "home" / "**" / "*"), recursive=True))


def test_an_erased_subjects_next_message_starts_a_new_session_under_a_new_key(make_turnlog, db):
    t = make_turnlog()
    t.handle_message(alice(), PHRASE, echo, collect([]))
    old = t.session(alice()).session_id
    t.erase_subject("telegram:42", actor="operator", cause="erase request")
    outcome = t.handle_message(alice(), "hello again", echo, collect([]))[0]
    assert outcome.session_id != old and outcome.created_session
    assert [m["content"] for m in t.transcript(outcome.session_id)] == ["hello again", "re: hello again"]
    t.close()
    with Turnlog(db) as again:  # the new key survives a reopen; the old one is gone for good
        assert [m["content"] for m in again.transcript(outcome.session_id)][0] == "hello again"
        assert again.transcript(old)[0]["content"] == "[erased]"


def test_in_a_shared_group_the_other_participants_text_is_untouched(make_turnlog):
    t = make_turnlog(config=EngineConfig(group_sessions_per_user=False))
    t.handle_message(group("7"), f"{PHRASE} from seven", echo, collect([]))
    t.handle_message(group("8"), "eight keeps this", echo, collect([]))
    session_id = t.session(group("8")).session_id
    assert t.session(group("7")).session_id == session_id
    t.erase_subject("telegram:7", actor="operator", cause="erase request")
    contents = [m["content"] for m in t.transcript(session_id)]
    assert contents == ["[erased]", "[erased]", "eight keeps this", "re: eight keeps this"]
    assert [h.snippet for h in t.search("eight")]
    assert t.search("marmalade") == []


def test_erase_needs_an_encrypted_database(tmp_path):
    with Turnlog(str(tmp_path / "plain.db"), encryption=False) as t:
        with pytest.raises(InvalidRequest, match="not encrypted"):
            t.erase_subject("telegram:42", actor="operator", cause="x")


def test_an_erased_subjects_session_title_is_in_no_byte_nor_any_summary(make_turnlog, db):
    t = make_turnlog()
    [outcome] = t.handle_message(alice(), "hello", echo, collect([]))
    assert t.set_title(outcome.session_id, "juniper marmalade title") == "juniper marmalade title"
    t.erase_subject("telegram:42", actor="operator", cause="erase request")
    checkpoint(db)
    assert b"juniper" not in bytes_of(db, db + "-wal")
    summaries = [e.summary for e in t.history(outcome.session_id)]
    assert any("title" in s for s in summaries) and not any("juniper" in s for s in summaries), summaries
