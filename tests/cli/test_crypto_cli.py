"""`turnlog encrypt`, `turnlog keys [rotate]`, `turnlog erase` and the key check of `restore` at
the command line: --json, help on every option, one-line errors (exit 2 usage, 1 runtime)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

from harness.cli import ok, run
from turnlog import Turnlog

from chat import alice, collect, echo
from test_cli import assert_one_line_error

PHRASE = "saffron viaduct 2219"


def test_erase_dry_run_then_erase_and_keys_rotate(tmp_path):
    db = str(tmp_path / "c.db")
    with Turnlog(db) as t:
        t.handle_message(alice(), PHRASE, echo, collect([]))
        fingerprint = t.key_fingerprint
    assert json.loads(ok("--db", db, "keys", "--json").stdout) == {"encrypted": True, "fingerprint": fingerprint}
    dry = json.loads(ok("--db", db, "erase", "--subject", "telegram:42", "--dry-run", "--json").stdout)
    assert dry["dry_run"] and dry["keys"] == 1 and dry["position"] is None
    text = ok("--db", db, "erase", "--subject", "telegram:42", "--reason", "user asked").stdout
    assert "destroyed 1 data key(s)" in text and "42" not in text.replace(dry["subject_hash"], "")
    assert PHRASE not in ok("--db", db, "search", "saffron").stdout
    key = "agent:main:telegram:dm:42"
    for args in (["show", key], ["export", key], ["history", key]):
        shown = ok("--db", db, *args).stdout
        assert PHRASE not in shown, args
    assert "[erased]" in ok("--db", db, "export", key).stdout
    rotated = json.loads(ok("--db", db, "keys", "rotate", "--json").stdout)
    assert rotated["previous_fingerprint"] == fingerprint and rotated["fingerprint"] != fingerprint
    assert "chain: ok" in ok("--db", db, "verify", "--chain").stdout


def test_a_database_without_its_key_is_one_line_exit_1_and_untouched(tmp_path):
    db = str(tmp_path / "k.db")
    with Turnlog(db) as t:
        t.handle_message(alice(), PHRASE, echo, collect([]))
    os.remove(db + ".key")
    before = hashlib.sha256(Path(db).read_bytes()).hexdigest()
    for args in (["sessions"], ["erase", "--subject", "telegram:42"], ["keys"]):
        assert_one_line_error(run("--db", db, *args), 1, "is encrypted and its master key")
    assert hashlib.sha256(Path(db).read_bytes()).hexdigest() == before


def test_encrypt_migrates_an_unencrypted_database(tmp_path, monkeypatch):
    db = str(tmp_path / "plain.db")
    with Turnlog(db, encryption=False) as t:
        t.handle_message(alice(), "old words", echo, collect([]))
    assert json.loads(ok("--db", db, "keys", "--json").stdout)["encrypted"] is False
    report = json.loads(ok("--db", db, "encrypt", "--json").stdout)
    assert report["since"] > 1 and os.path.exists(db + ".key")
    assert_one_line_error(run("--db", db, "encrypt"), 2, "encrypted already")


def test_restore_checks_the_master_key_is_at_hand(tmp_path):
    db, backup, target = str(tmp_path / "a.db"), str(tmp_path / "b.db"), str(tmp_path / "r.db")
    with Turnlog(db) as t:
        t.handle_message(alice(), PHRASE, echo, collect([]))
    report = json.loads(ok("--db", db, "backup", backup, "--json").stdout)
    assert report["key_fingerprint"] and report["key_fingerprint"] in ok("--db", db, "keys").stdout
    assert_one_line_error(run("--db", target, "restore", backup), 1, report["key_fingerprint"])
    assert not os.path.exists(target)
    key = Path(db + ".key").read_text()
    os.environ["TURNLOG_MASTER_KEY"] = key.strip()
    try:
        restored = json.loads(ok("--db", target, "restore", backup, "--json").stdout)
    finally:
        del os.environ["TURNLOG_MASTER_KEY"]
    assert restored["key_fingerprint"] == report["key_fingerprint"]
    with Turnlog(target, master_key=base64.b64decode(key)) as t:
        assert t.transcript(t.session(alice()).session_id)[0]["content"] == PHRASE


def test_rotate_to_a_given_key_file(tmp_path):
    db, new = str(tmp_path / "g.db"), tmp_path / "new.key"
    with Turnlog(db) as t:
        t.handle_message(alice(), PHRASE, echo, collect([]))
    new.write_text(base64.b64encode(os.urandom(32)).decode())
    ok("--db", db, "keys", "rotate", "--new-key-file", str(new))
    assert Path(db + ".key").read_text().strip() == new.read_text().strip()
    bad = tmp_path / "bad.key"
    bad.write_text("not base64!")
    assert_one_line_error(run("--db", db, "keys", "rotate", "--new-key-file", str(bad)), 2, "base64")


def test_a_bad_master_key_makes_no_new_database(tmp_path, monkeypatch):
    monkeypatch.setenv("TURNLOG_MASTER_KEY", "not a key")
    result = run("--db", str(tmp_path / "new.db"), "route", "--platform", "telegram", "--chat-id", "42",
                 "--user-id", "42")
    assert_one_line_error(result, 2, "TURNLOG_MASTER_KEY (its value not shown) is not base64")
    assert os.listdir(tmp_path) == []


def test_encrypt_refuses_a_database_a_gateway_has_open(tmp_path):
    # A gateway opened before the marker would go on writing its events unsealed after it, where
    # erase cannot reach them: stop it first.
    from harness import procs
    db = tmp_path / "plain.db"
    with Turnlog(str(db), encryption=False) as t:
        t.handle_message(alice(), PHRASE, echo, collect([]))
    holder = procs.start(db, "t = kit.turnlog(encryption=False); t.sessions(); kit.ready(); kit.hang()", work=tmp_path)
    try:
        procs.wait_for(tmp_path / "ready.json", holder)
        assert_one_line_error(run("--db", str(db), "encrypt"), 1, f"in use by process {holder.pid}")
    finally:
        holder.kill()
        holder.wait()
    assert json.loads(ok("--db", str(db), "keys", "--json").stdout)["encrypted"] is False
    assert json.loads(ok("--db", str(db), "encrypt", "--json").stdout)["fingerprint"]  # stopped: it goes


def test_keys_rotate_refuses_a_database_a_gateway_has_open(tmp_path):
    # A gateway opened before the rotation would wrap a new subject's data key under the old master
    # key, which then opens nothing: the database would be unreadable from that event on.
    from harness import procs
    db = tmp_path / "c.db"
    with Turnlog(str(db)) as t:
        t.handle_message(alice(), PHRASE, echo, collect([]))
        fingerprint = t.key_fingerprint
    holder = procs.start(db, "t = kit.turnlog(); t.sessions(); kit.ready(); kit.hang()", work=tmp_path)
    try:
        procs.wait_for(tmp_path / "ready.json", holder)
        assert_one_line_error(run("--db", str(db), "keys", "rotate"), 1, f"in use by process {holder.pid}")
    finally:
        holder.kill()
        holder.wait()
    assert json.loads(ok("--db", str(db), "keys", "--json").stdout)["fingerprint"] == fingerprint
    assert not os.path.exists(f"{db}.key.new")
    rotated = json.loads(ok("--db", str(db), "keys", "rotate", "--json").stdout)  # stopped: it goes
    assert rotated["previous_fingerprint"] == fingerprint
