"""--db values that are neither a plain path nor a well-formed postgresql:// URL: a malformed URL is
a one-line usage error naming it, a `file:` URI or `:memory:` (the Python API's own, opened
unchecked) is refused at the command line, and a PostgreSQL log that cannot be reached leaves no
read-model file behind."""

from __future__ import annotations

import os

import pytest

from harness.cli import run
from test_cli import assert_one_line_error

ROUTE = ["route", "--platform", "telegram", "--chat-id", "42", "--user-id", "42"]


@pytest.mark.parametrize("url,mentions", [
    ("postgresql://host:abc/x", "port"),
    ("postgresql://host:99999/x", "port"),
    ("postgresql://host:-1/x", "port"),
    ("postgresql://[::1/x", "postgresql://[::1/x"),
    ("postgresql://me:s3cret@host:abc/x", "postgresql://host:abc/x"),  # never the password
])
def test_a_malformed_postgresql_url_is_a_usage_error_naming_it(tmp_path, url, mentions):
    result = run("--db", url, "--views", str(tmp_path / "v.db"), "sessions")
    assert_one_line_error(result, 2, mentions)
    assert "ValueError" not in result.output and "s3cret" not in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["sessions"], ROUTE])
def test_an_unreachable_postgresql_log_leaves_no_read_model_file(tmp_path, command):
    result = run("--db", "postgresql://nobody@127.0.0.1:1/x", "--views", str(tmp_path / "v.db"), *command)
    assert_one_line_error(result, 1, "cannot open")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("db", ["file:{tmp}/x.db", "file:{tmp}/x.db?mode=rwc", ":memory:", "file::memory:"])
@pytest.mark.parametrize("command", [["sessions"], ROUTE])
def test_a_uri_or_memory_database_is_refused_at_the_command_line(tmp_path, monkeypatch, db, command):
    monkeypatch.chdir(tmp_path)
    result = run("--db", db.format(tmp=tmp_path), *command)
    assert_one_line_error(result, 2, "path")
    assert os.listdir(tmp_path) == []


@pytest.fixture
def sqlite_db(tmp_path) -> str:
    db = str(tmp_path / "log.db")
    assert run("--db", db, *ROUTE).exit_code == 0
    return db


def test_a_views_file_beside_an_sqlite_log_that_is_a_folder_or_no_database_is_refused_by_name(sqlite_db, tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    text = tmp_path / "notes.txt"
    text.write_text("shopping list\n")
    for views in (folder, text):
        result = run("--db", sqlite_db, "--views", str(views), "sessions")
        assert_one_line_error(result, 1, str(views))
        assert "OperationalError" not in result.output and "DatabaseError" not in result.output
    assert text.read_text() == "shopping list\n" and list(folder.iterdir()) == []


def test_another_log_is_never_taken_as_the_read_model_file(sqlite_db, tmp_path):
    other = str(tmp_path / "other.db")
    assert run("--db", other, "route", "--platform", "discord", "--chat-type", "group", "--chat-id", "b1").exit_code == 0
    before = run("--db", other, "sessions", "--json").stdout
    for command in (["sessions"], ROUTE):
        assert_one_line_error(run("--db", sqlite_db, "--views", other, *command), 1, "holds a log of its own")
    assert run("--db", other, "sessions", "--json").stdout == before
    assert '"ok": true' in run("--db", other, "verify", "--json").stdout
