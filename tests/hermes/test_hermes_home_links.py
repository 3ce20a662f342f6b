"""Issue 19 item 8: import-hermes never reads a file whose resolved path leaves the home (a planted
link may name any file of the user): it is skipped and named in the report; a state.db (or its WAL)
that leaves the home is refused in one line. Links that stay inside the home are read as usual."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.cli import ok, run
from harness.hermes_home import copy_home

LID = "platforms/whatsapp/session/lid-mapping-15551234567.json"
SECRET = "424242424242424"  # what the outside files hold: must appear nowhere


def linked_home(tmp_path: Path) -> Path:
    home = copy_home(tmp_path / "home")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "lid.json").write_text(json.dumps(SECRET))
    routing = json.loads((home / "sessions" / "sessions.json").read_text())
    routing["agent:main:telegram:dm:" + SECRET] = {**routing["agent:main:telegram:dm:5512345678"],
                                                  "session_key": "agent:main:telegram:dm:" + SECRET}
    (outside / "sessions.json").write_text(json.dumps(routing))
    (outside / "gateway.json").write_text(json.dumps({"session_reset": {"mode": SECRET}}))
    for name, target in ((LID, "lid.json"), ("sessions/sessions.json", "sessions.json"),
                         ("gateway.json", "gateway.json")):
        (home / name).unlink()
        (home / name).symlink_to(outside / target)
    # a link that stays inside the home is an ordinary file of the home
    (home / "memories").mkdir(exist_ok=True)
    shutil.move(home / "config.yaml", home / "memories" / "config.yaml")
    (home / "config.yaml").symlink_to(home / "memories" / "config.yaml")
    return home


def test_files_linked_out_of_the_home_are_skipped_and_named(tmp_path) -> None:
    home = linked_home(tmp_path)
    db = str(tmp_path / "t.db")
    report = json.loads(ok("--db", db, "import-hermes", str(home), "--json").stdout)
    skipped = {s["what"]: s["reason"] for s in report["skipped"]}
    for name in (LID, "sessions/sessions.json", "gateway.json"):
        assert "outside the home: not read" in skipped[name], report["skipped"]
    assert "config.yaml" not in skipped
    assert report["sessions_imported"] == 14 and report["routes_imported"] == 10  # the DB's routing index
    out = tmp_path / "out"
    ok("--db", db, "export-hermes", str(out))
    exported = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    assert SECRET not in exported
    history = ok("--db", db, "history", "20261105_210210_ae4d6fdf", "--json").stdout
    assert SECRET not in history and SECRET not in ok("--db", db, "export-routing").stdout


def test_a_state_db_linked_out_of_the_home_is_refused_in_one_line(tmp_path) -> None:
    home = copy_home(tmp_path / "home")
    shutil.move(home / "state.db", tmp_path / "elsewhere.db")
    (home / "state.db").symlink_to(tmp_path / "elsewhere.db")
    db = str(tmp_path / "t.db")
    result = run("--db", db, "import-hermes", str(home))
    assert result.exit_code == 1 and "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and "outside the home: not read" in errors[0]
    (home / "state.db").unlink()
    shutil.copy(tmp_path / "elsewhere.db", home / "state.db")
    (home / "state.db-wal").unlink(missing_ok=True)  # an empty WAL (the shared fixture may have one)
    (home / "state.db-wal").symlink_to(tmp_path / "elsewhere.db")
    result = run("--db", db, "import-hermes", str(home))
    assert result.exit_code == 1 and "state.db-wal: a link to a file outside the home" in result.output
