"""The real Hermes 0.19.0 home of ../shared/fixtures, and bigger homes made from its rows."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def fixture_home() -> Path:
    """shared/ sits beside the repository in a CI clone and beside its parent in a worktree."""
    for base in (REPO.parent, REPO.parent.parent):
        home = base / "shared" / "fixtures" / "hermes-home-v019"
        if (home / "state.db").is_file():
            return home
    raise FileNotFoundError("shared/fixtures/hermes-home-v019 not found beside the repository")


def copy_home(dst: Path) -> Path:
    shutil.copytree(fixture_home(), dst)
    return dst


def grown_home(dst: Path, copies: int) -> Path:
    """The fixture home plus `copies` copies of every session and message row under new ids
    (`<id>_c<n>`, messages renumbered in the same order), so about 123 * (copies + 1) messages.

    Only the rows are copied: the copies have no routing entries. The FTS triggers are dropped
    first (an importer ignores Hermes' FTS tables; filling them would only slow the generation).
    """
    copy_home(dst)
    db = sqlite3.connect(dst / "state.db")
    with db:
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
            db.execute(f"DROP TRIGGER {name}")
        session_cols = [r[1] for r in db.execute("PRAGMA table_info(sessions)")]
        message_cols = [r[1] for r in db.execute("PRAGMA table_info(messages)") if r[1] != "id"]
        originals = [r[0] for r in db.execute("SELECT id FROM sessions")]
        marks = ",".join("?" * len(originals))
        renamed = {"id": "id || ?1", "parent_session_id": "parent_session_id || ?1", "title": "title || ?1",
                   "session_key": "NULL"}
        for n in range(1, copies + 1):
            suffix = f"_c{n}"
            db.execute(f"INSERT INTO sessions ({', '.join(session_cols)}) SELECT "
                       + ", ".join(renamed.get(c, c) for c in session_cols)
                       + f" FROM sessions WHERE id IN ({marks}) ORDER BY rowid", (suffix, *originals))
            db.execute(f"INSERT INTO messages ({', '.join(message_cols)}) SELECT "
                       + ", ".join("session_id || ?1" if c == "session_id" else c for c in message_cols)
                       + f" FROM messages WHERE session_id IN ({marks}) ORDER BY id", (suffix, *originals))
    db.close()
    return dst
