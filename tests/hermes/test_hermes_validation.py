"""Issue 19 item 10: an unknown schema version is refused in one line (--force to try anyway), and
session ids go through the id rules (domain/source.py: check_id, check_session_id): the bad ones
are skipped with the reason, with their messages; everything else imports."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from harness.cli import ok, run
from harness.hermes_home import copy_home

BAD_IDS = {
    "": "session_id is empty",
    "42\x00x": "session_id holds a control character",
    "\x1b]0;pwned\x07": "session_id holds a control character",
    "../../../etc/passwd": "session_id holds '..' (a path or markup)",
    "<script>alert(1)</script>": "session_id holds '<' (a path or markup)",
    "C:evil": "session_id holds 'C:' (a path or markup)",
    "   ": "session_id is only whitespace",
}


def home_with(tmp_path: Path, sql: list[tuple[str, tuple]]) -> Path:  # type: ignore[type-arg]
    home = copy_home(tmp_path / "home")
    db = sqlite3.connect(home / "state.db")
    with db:
        for statement, params in sql:
            db.execute(statement, params)
    db.close()
    return home


@pytest.mark.parametrize("version", [999, "twenty-two"])
def test_an_unknown_schema_version_is_refused_in_one_line_unless_forced(tmp_path, version) -> None:
    home = home_with(tmp_path, [("UPDATE schema_version SET version=?", (version,))])
    db = str(tmp_path / "t.db")
    result = run("--db", db, "import-hermes", str(home))
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "schema version" in lines[0] and "give --force to try anyway" in lines[0]
    assert not os.path.exists(db)  # refused before a database was made to import into
    report = json.loads(ok("--db", db, "import-hermes", str(home), "--force", "--json").stdout)
    assert report["sessions_imported"] == 14


def test_bad_session_ids_are_skipped_with_the_reason(tmp_path) -> None:
    sql = []
    for n, ident in enumerate(BAD_IDS):
        sql.append(("INSERT INTO sessions (id, source, started_at) VALUES (?, 'telegram', ?)", (ident, 1.79e9 + n)))
        sql.append(("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', 'hi', ?)",
                    (ident, 1.79e9 + n)))
    home = home_with(tmp_path, sql)
    db = str(tmp_path / "t.db")
    report = json.loads(ok("--db", db, "import-hermes", str(home), "--json").stdout)
    assert (report["sessions_found"], report["sessions_imported"]) == (14 + len(BAD_IDS), 14)
    reasons = [s["reason"] for s in report["skipped"] if s["what"].startswith("session ")]
    for ident, reason in BAD_IDS.items():
        assert any(r.startswith(reason) for r in reasons), (ident, reasons)
    their_messages = [s for s in report["skipped"] if "messages of session" in s["what"]]
    assert len(their_messages) == len(BAD_IDS)
    assert all(s["reason"].startswith("their session is skipped (session_id") for s in their_messages)
    ids = {s["session_id"] for s in json.loads(ok("--db", db, "sessions", "--json").stdout)}
    assert len(ids) == 14 and not ids & set(BAD_IDS)
    # the table output stays one row per line: no control character reaches the terminal
    table = ok("--db", str(tmp_path / "t2.db"), "import-hermes", str(home)).output
    assert "\x1b" not in table and "\x00" not in table
