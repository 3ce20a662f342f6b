"""An encrypted log's backup holds its words sealed only: the read models, which hold them in clear
(the search table and its full-text indexes), are left out of it, and the first open of the
restored database rebuilds them from the log."""

from __future__ import annotations

import shutil
import sqlite3

import turnlog
from turnlog import SessionSource, Turnlog

PHRASE = "periwinkle tangerine ultramarine"


def source(n: int) -> SessionSource:
    return SessionSource(platform="telegram", chat_type="dm", chat_id=f"{40 + n}", user_id=f"{40 + n}",
                         message_id=f"m{n}")


def converse(t: Turnlog) -> None:
    for n in range(3):
        t.handle_message(source(n), f"message {n}: {PHRASE}", lambda history, item: f"re: {item.text}",
                         lambda *a: None)


def tables(path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        db.close()


def test_an_encrypted_logs_backup_has_no_word_in_clear_and_its_restore_finds_them_again(tmp_path):
    db = tmp_path / "live.db"
    with Turnlog(db) as t:
        converse(t)
        assert t.key_fingerprint is not None  # encrypted by default
        before = {s.session_id: t.transcript(s.session_id) for s in t.sessions()}
        assert len(t.search("tangerine")) == 6  # three messages and their three replies
        live = db.read_bytes() + (tmp_path / "live.db-wal").read_bytes()
        assert PHRASE.encode() in live  # the live database's read models hold the words in clear
        report = t.backup(tmp_path / "backup.db")
    assert report.read_models is False
    backup = (tmp_path / "backup.db").read_bytes()
    assert PHRASE.encode() not in backup and b"periwinkle" not in backup
    assert "search_messages" not in tables(tmp_path / "backup.db")
    assert "stored_events" in tables(tmp_path / "backup.db")

    shutil.copy(str(db) + ".key", tmp_path / "key")
    turnlog.restore(tmp_path / "backup.db", tmp_path / "restored.db", key_file=tmp_path / "key")
    with Turnlog(tmp_path / "restored.db") as t:
        assert {s.session_id: t.transcript(s.session_id) for s in t.sessions()} == before
        assert len(t.search("tangerine")) == 6
        assert t.maintenance.verify_chain().breaks == []
        assert t.maintenance.verify()["ok"] is True


def test_an_unencrypted_logs_backup_keeps_its_read_models(tmp_path):
    with Turnlog(tmp_path / "plain.db", encryption=False) as t:
        converse(t)
        report = t.backup(tmp_path / "backup.db")
    assert report.read_models is True
    assert "search_messages" in tables(tmp_path / "backup.db")


def test_the_cli_says_the_read_models_were_left_out(tmp_path):
    from click.testing import CliRunner
    from turnlog.cli import main

    with Turnlog(tmp_path / "live.db") as t:
        converse(t)
    result = CliRunner().invoke(main, ["--db", str(tmp_path / "live.db"), "backup", str(tmp_path / "b.db")])
    assert result.exit_code == 0, result.output
    assert "read models: left out" in result.output
