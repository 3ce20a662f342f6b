"""Issue 19 item 9: one bad row does not abort an import. Invalid UTF-8 in messages.content or
sessions.display_name, a BLOB content, text where a number belongs: the cell is repaired (decoded
with U+FFFD, and said so in `repaired`) or the row skipped with its reason; everything else
imports, and a re-run finishes (nothing left to import)."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from harness.cli import ok
from harness.hermes_home import copy_home

TG_DM_2 = "20261105_210210_ae4d6fdf"
CLI = "20261120_220000_348029"


def damaged_home(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """The fixture with damaged cells; returns the home and the ids of the damaged message rows."""
    home = copy_home(tmp_path / "home")
    db = sqlite3.connect(home / "state.db")
    with db:
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
            db.execute(f"DROP TRIGGER {name}")  # Hermes' FTS triggers cannot index what we plant
        first, second, third, fourth = [r[0] for r in db.execute(
            "SELECT id FROM messages WHERE session_id=? AND role != 'session_meta' ORDER BY id", (TG_DM_2,))]
        db.execute("UPDATE messages SET content = CAST(X'48656c6c6fff20776f726c64' AS TEXT) WHERE id=?", (first,))
        db.execute("UPDATE messages SET content = X'00ff10' WHERE id=?", (second,))
        db.execute("UPDATE messages SET timestamp = 'yesterday', token_count = 'many' WHERE id=?", (third,))
        db.execute("UPDATE sessions SET display_name = CAST(X'4d6569ff' AS TEXT) WHERE id=?", (TG_DM_2,))
        # the very first row read (lowest session id, lowest id): decoded while the query starts
        db.execute("UPDATE messages SET content = CAST(X'c328' AS TEXT) WHERE id=1")
        db.execute("UPDATE messages SET tool_calls = '[{\"id\": 123456789012345678901234567890}]' WHERE id=?",
                   (fourth,))
    db.close()
    return home, {"invalid": first, "blob": second, "types": third, "json": fourth}


def test_damaged_cells_are_repaired_and_named_and_everything_imports(tmp_path) -> None:
    home, ids = damaged_home(tmp_path)
    db = str(tmp_path / "t.db")
    report = json.loads(ok("--db", db, "import-hermes", str(home), "--json").stdout)
    assert (report["sessions_found"], report["sessions_imported"]) == (14, 14)
    assert report["messages_imported"] == 111  # as for the intact fixture (undone and compacted rows too): no row lost
    repaired = {(r["what"], r["reason"]) for r in report["repaired"]}
    assert (f"message {ids['invalid']} of session {TG_DM_2}",
            "content is not valid UTF-8: decoded with replacement characters") in repaired
    assert (f"message {ids['blob']} of session {TG_DM_2}",
            "content is a BLOB: decoded as UTF-8 with replacement characters") in repaired
    assert (f"message {ids['types']} of session {TG_DM_2}", "timestamp is 'yesterday', not a time") in repaired
    assert (f"message {ids['types']} of session {TG_DM_2}",
            "token_count is 'many', not a whole number >= 0: dropped") in repaired
    assert (f"session {TG_DM_2}", "display_name is not valid UTF-8: decoded with replacement characters") \
        in repaired
    assert ("message 1 of session 20261102_081406_29be5d21",
            "content is not valid UTF-8: decoded with replacement characters") in repaired
    shown = json.loads(ok("--db", db, "show", TG_DM_2, "--json").stdout)
    contents = [m["content"] for m in shown["messages"]]
    assert contents[0] == "Hello\ufffd world" and contents[1] == "\x00\ufffd\x10"
    assert shown["messages"][2]["token_count"] is None
    # the time of a row without one is the previous row's (here the session_meta marker after row 2)
    previous = sqlite3.connect(home / "state.db").execute(
        "SELECT timestamp FROM messages WHERE session_id=? AND id < ? ORDER BY id DESC", (TG_DM_2, ids["types"])
    ).fetchone()[0]
    assert shown["messages"][2]["timestamp"] == datetime.fromtimestamp(previous, timezone.utc).isoformat()
    again = json.loads(ok("--db", db, "import-hermes", str(home), "--json").stdout)
    assert again["nothing_to_do"] and again["sessions_already_imported"] == 14
    assert again["repaired"] == []  # named when imported, not again on a run that skips them


def test_the_table_output_lists_the_repairs(tmp_path) -> None:
    home, _ = damaged_home(tmp_path)
    out = ok("--db", str(tmp_path / "t.db"), "import-hermes", str(home)).output
    assert "repaired: 7" in out and "decoded with replacement characters" in out and "Traceback" not in out
