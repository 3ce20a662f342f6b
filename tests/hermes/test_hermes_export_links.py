"""Issue 19 item 7: `export-hermes` never writes through a symbolic link (temporary files are created
exclusively, under names nobody can plant, beside their destination) and replaces an existing home
only with --force, as `export -o` does (tests/cli/test_export_output_file.py)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from harness.cli import run
from harness.hermes_home import fixture_home

from turnlog import ManualClock, SequentialIds, Turnlog

PLANTED = ("sessions/.sessions.json.tmp", ".gateway.json.tmp", ".config.yaml.tmp", ".restart_failure_counts.tmp",
           "platforms/whatsapp/session/.lid-mapping-15551234567.json.tmp")


# Not conftest's `db`: module-scoped, a log holding the fixture Hermes home's import.
@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("links") / "t.db"
    with Turnlog(str(path), clock=ManualClock("2026-12-01T00:00:00+00:00"), session_ids=SequentialIds()) as t:
        t.import_hermes(fixture_home())
    return str(path)


def victim(tmp_path: Path) -> Path:
    target = tmp_path / "victim.txt"
    target.write_text("do not touch\n")
    return target


def one_line_error(result, mentions: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and mentions in errors[0], result.output


def test_links_planted_at_the_old_temporary_names_are_not_written_through(db, tmp_path) -> None:
    target = victim(tmp_path)
    out = tmp_path / "out"
    for name in PLANTED:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).symlink_to(target)
    result = run("--db", db, "export-hermes", str(out))
    assert result.exit_code == 0, result.output
    assert target.read_text() == "do not touch\n"
    for name in ("sessions/sessions.json", "gateway.json", "config.yaml", ".restart_failure_counts", "state.db"):
        assert (out / name).is_file() and not (out / name).is_symlink(), name
    assert sqlite3.connect(out / "state.db").execute("SELECT count(*) FROM sessions").fetchone() == (14,)
    temporary = [p for p in out.rglob("*.tmp") if not p.is_symlink()]
    assert temporary == []  # none of the export's own temporary files is left behind


@pytest.mark.parametrize("name", ["sessions/sessions.json", "gateway.json", "state.db"])
def test_a_link_at_a_destination_is_refused_even_with_force(db, tmp_path, name) -> None:
    target = victim(tmp_path)
    out = tmp_path / "out"
    (out / name).parent.mkdir(parents=True, exist_ok=True)
    (out / name).symlink_to(target)
    for force in ([], ["--force"]):
        one_line_error(run("--db", db, "export-hermes", str(out), *force), "symbolic link")
        assert target.read_text() == "do not touch\n" and (out / name).is_symlink()
    assert not (out / "state.db").exists() or name == "state.db"  # nothing half-written


def test_a_linked_directory_or_home_is_refused(db, tmp_path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "sessions").symlink_to(elsewhere)
    one_line_error(run("--db", db, "export-hermes", str(out)), "symbolic link")
    linked_home = tmp_path / "linked-home"
    linked_home.symlink_to(elsewhere)
    one_line_error(run("--db", db, "export-hermes", str(linked_home)), "symbolic link")
    assert list(elsewhere.iterdir()) == []


def test_an_existing_home_is_replaced_only_with_force(db, tmp_path) -> None:
    out = tmp_path / "out"
    assert run("--db", db, "export-hermes", str(out)).exit_code == 0
    (out / "gateway.json").write_text("{}")
    before = (out / "state.db").read_bytes()
    one_line_error(run("--db", db, "export-hermes", str(out)), "give --force")
    assert (out / "gateway.json").read_text() == "{}" and (out / "state.db").read_bytes() == before
    result = run("--db", db, "export-hermes", str(out), "--force")
    assert result.exit_code == 0, result.output
    assert (out / "gateway.json").read_text() != "{}"
    assert oct(os.stat(out / "state.db").st_mode & 0o777) == oct(0o644)
