"""Encryption at rest: a new database is sealed under per-subject data keys wrapped by a master
key; without that key it is refused having read and written nothing; rotation re-wraps the
keys and rewrites no event; an unencrypted database keeps working and `encrypt` migrates it."""

from __future__ import annotations

import base64
import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

import turnlog
from turnlog import EncryptionKeyMissing, SessionSource, Turnlog
from turnlog.storage.event_compressor import inflate

from chat import alice, collect, echo

PHRASE = "tangerine cathedral whispers"


def _files(db: str) -> dict[str, str | None]:
    return {p: (hashlib.sha256(Path(p).read_bytes()).hexdigest() if os.path.exists(p) else None)
            for p in (db, db + "-wal", db + "-shm")}


def _states(db: str) -> list[bytes]:
    """The stored events' JSON (compressed ones inflated: a phrase would not show in the zstd bytes)."""
    conn = sqlite3.connect(db)
    try:
        return [inflate(bytes(r[0])) for r in conn.execute("SELECT state FROM stored_events ORDER BY rowid")]
    finally:
        conn.close()


def test_a_new_database_is_encrypted_under_a_key_file_only_its_owner_reads(make_turnlog, db):
    t = make_turnlog()
    t.handle_message(alice(user_name="alice"), PHRASE, echo, collect([]))
    assert t.key_fingerprint is not None and len(t.key_fingerprint) == 16
    assert os.stat(db + ".key").st_mode & 0o777 == 0o600
    assert t.transcript(t.session(alice()).session_id)[0]["content"] == PHRASE  # plaintext in memory
    states = b"".join(_states(db))
    assert PHRASE.encode() not in states and b"alice" not in states and b'"_sealed_"' in states
    assert t.maintenance.verify_chain().breaks == []


def test_without_its_master_key_a_database_is_refused_and_nothing_is_read_or_written(make_turnlog, db):
    t = make_turnlog()
    t.handle_message(alice(), PHRASE, echo, collect([]))
    fingerprint = t.key_fingerprint
    t.close()
    os.rename(db + ".key", db + ".key.away")
    before = _files(db)
    with pytest.raises(EncryptionKeyMissing, match=f"master key \\(fingerprint {fingerprint}\\) is not at hand"):
        Turnlog(db)
    with pytest.raises(EncryptionKeyMissing):
        Turnlog(db, read_only=True)
    assert _files(db) == before
    with pytest.raises(EncryptionKeyMissing, match=f"needs master key {fingerprint}"):
        Turnlog(db, master_key=os.urandom(32))
    assert _files(db) == before


def test_the_key_can_come_from_the_environment_or_a_callable(tmp_path, monkeypatch):
    key = os.urandom(32)
    db = str(tmp_path / "env.db")
    monkeypatch.setenv("TURNLOG_MASTER_KEY", base64.b64encode(key).decode())
    with Turnlog(db) as t:
        t.handle_message(alice(), PHRASE, echo, collect([]))
        fingerprint = t.key_fingerprint
    assert not os.path.exists(db + ".key")  # the key is the environment's: none is written
    monkeypatch.delenv("TURNLOG_MASTER_KEY")
    calls = []
    with Turnlog(db, master_key=lambda: calls.append(1) or key) as t:
        assert t.key_fingerprint == fingerprint and calls == [1]
        assert t.transcript(t.session(alice()).session_id)[0]["content"] == PHRASE


def test_rotation_rewraps_the_data_keys_and_rewrites_no_event(make_turnlog, db):
    t = make_turnlog()
    t.handle_message(alice(), PHRASE, echo, collect([]))
    t.handle_message(SessionSource(platform="slack", chat_type="dm", chat_id="D9", user_id="U9"), "hi", echo,
                     collect([]))
    old_key = Path(db + ".key").read_text()
    events_before = _states(db)
    report = t.rotate_master_key()
    assert report.rewrapped >= 2 and report.previous_fingerprint != report.fingerprint
    assert _states(db) == events_before
    assert Path(db + ".key").read_text() != old_key and os.stat(db + ".key").st_mode & 0o777 == 0o600
    t.close()
    with pytest.raises(EncryptionKeyMissing):
        Turnlog(db, master_key=base64.b64decode(old_key))
    with Turnlog(db) as again:
        assert again.key_fingerprint == report.fingerprint
        assert again.transcript(again.session(alice()).session_id)[0]["content"] == PHRASE
        assert again.maintenance.verify_chain().breaks == []


def test_a_given_key_is_rotated_to_a_given_new_key(tmp_path):
    db, old, new = str(tmp_path / "given.db"), os.urandom(32), os.urandom(32)
    with Turnlog(db, master_key=old) as t:
        t.handle_message(alice(), PHRASE, echo, collect([]))
        with pytest.raises(turnlog.InvalidRequest, match="give the new key"):
            t.rotate_master_key()
        t.rotate_master_key(new)
    with Turnlog(db, master_key=new) as t:
        assert t.transcript(t.session(alice()).session_id)[0]["content"] == PHRASE


def test_an_unencrypted_database_keeps_working_and_encrypt_seals_from_then_on(tmp_path):
    db = str(tmp_path / "plain.db")
    with Turnlog(db, encryption=False) as t:
        t.handle_message(alice(), "before encryption", echo, collect([]))
        assert t.key_fingerprint is None
    assert not os.path.exists(db + ".key")
    with Turnlog(db) as t:  # default on applies to new databases only
        assert t.key_fingerprint is None
        report = t.encrypt()
        assert report.since > 1 and os.path.exists(db + ".key")
        t.handle_message(alice(), PHRASE, echo, collect([]))
        assert [m["content"] for m in t.transcript(t.session(alice()).session_id)][::2] == [
            "before encryption", PHRASE]
        assert t.maintenance.verify_chain().breaks == []
    states = b"".join(_states(db))
    assert b"before encryption" in states and PHRASE.encode() not in states
    with Turnlog(db) as t:
        assert t.erase_subject("telegram:42", actor="test", cause="test", dry_run=True).plaintext_before == \
            report.since - 1


def test_a_rotation_killed_before_its_key_file_moved_opens_with_the_new_key(make_turnlog, db):
    t = make_turnlog()
    t.handle_message(alice(), PHRASE, echo, collect([]))
    old_key = Path(db + ".key").read_text()
    t.rotate_master_key()
    new_key = Path(db + ".key").read_text()
    t.close()
    # the state a kill between the database's commit and the file's move leaves
    Path(db + ".key.new").write_text(new_key)
    Path(db + ".key").write_text(old_key)
    with Turnlog(db) as again:
        assert again.transcript(again.session(alice()).session_id)[0]["content"] == PHRASE
    assert Path(db + ".key").read_text() == new_key and not os.path.exists(db + ".key.new")


@pytest.mark.parametrize("master_key", [b"short", lambda: b"short", "text"])
def test_a_bad_master_key_is_refused_before_a_new_database_is_made(tmp_path, master_key):
    with pytest.raises(EncryptionKeyMissing):
        Turnlog(str(tmp_path / "new.db"), master_key=master_key)
    assert os.listdir(tmp_path) == []


def test_a_master_key_callable_that_fails_makes_no_new_database(tmp_path):
    def kms() -> bytes:
        raise ConnectionError("the KMS is down")
    with pytest.raises(ConnectionError):
        Turnlog(str(tmp_path / "new.db"), master_key=kms)
    assert os.listdir(tmp_path) == []


def test_a_bad_key_in_the_environment_does_not_stop_an_unencrypted_new_database(tmp_path, monkeypatch):
    monkeypatch.setenv("TURNLOG_MASTER_KEY", "not a key")
    with Turnlog(str(tmp_path / "plain.db"), encryption=False) as t:
        t.get_or_create_session(SessionSource(platform="telegram", chat_id="1", user_id="1"))
    assert os.listdir(tmp_path) == ["plain.db"]
