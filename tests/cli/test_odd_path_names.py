"""Paths whose names hold `#`, `?` or `%`: SQLite reads a `file:` URI's path up to `?` or `#`
and decodes `%XX` in it, so such a name used unquoted in a URI opened another file (or none)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import pytest

from harness.cli import ok, run
from harness.hermes_home import copy_home

ROUTE = ["route", "--platform", "telegram", "--chat-id", "42", "--user-id", "42"]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", ["g#1.db", "p%41.db", "q?x=1.db", "a%23b#c?d.db"])
def test_a_database_named_with_uri_characters_is_that_file_and_no_other(tmp_path, name):
    db = tmp_path / name
    ok("--db", str(db), *ROUTE)
    assert sorted(os.listdir(tmp_path)) == [name, f"{name}.key"]  # the key file; no stray `g`, `pA.db`, `q`
    listed = ok("--db", str(db), "sessions", "--json").output
    assert "agent:main:telegram:dm:42" in listed


def test_a_hash_in_the_name_never_touches_the_file_its_prefix_names(tmp_path):
    other = tmp_path / "g"
    with sqlite3.connect(other) as conn:  # another program's database, where the URI was cut
        conn.execute("CREATE TABLE notes (text TEXT)")
    conn.close()
    before = sha(other)
    ok("--db", str(tmp_path / "g#1.db"), *ROUTE)
    assert "agent:main:telegram:dm:42" in ok("--db", str(tmp_path / "g#1.db"), "sessions", "--json").output
    assert sha(other) == before


def test_a_hermes_home_named_with_a_hash_is_imported_read_only(tmp_path):
    home = copy_home(tmp_path / "hm#1")
    state = home / "state.db"
    before = sha(state)
    report = json.loads(ok("--db", str(tmp_path / "t.db"), "import-hermes", str(home), "--json").output)
    assert report["sessions_imported"] > 0
    assert not (tmp_path / "hm").exists()  # the URI cut at `#` opened (and created) this
    assert sha(state) == before
    assert len(ok("--db", str(tmp_path / "t.db"), "sessions", "--json").output) > 100


def test_a_name_too_long_for_the_files_beside_it_is_refused_before_anything_is_made(tmp_path):
    # 232 bytes: a legal file name, but the temporaries made beside it (compact-file, restore) would not be
    limit = os.pathconf(tmp_path, "PC_NAME_MAX") - 33
    result = run("--db", str(tmp_path / ("n" * (limit - 3 + 13) + ".db")), *ROUTE)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len(result.stderr.splitlines()) == 1 and "name is" in result.stderr and "OperationalError" not in result.stderr
    assert os.listdir(tmp_path) == []
    longest = "n" * (limit - 3) + ".db"
    ok("--db", str(tmp_path / longest), *ROUTE)
    assert sorted(os.listdir(tmp_path)) == [longest, f"{longest}.key"]
    ok("--db", str(tmp_path / longest), "compact-file")  # its temporary fits beside it
    ok("--db", str(tmp_path / longest), "keys", "rotate")
