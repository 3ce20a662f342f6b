"""The set-up most viewer tests share: the log of web_db built in the test's folder, and the
viewer's snapshot copies kept in a folder of the test's own (not the machine's temporary folder),
so that a test can count them and none is left behind on another test's account."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass

import pytest

import web_db


@dataclass(frozen=True)
class ViewerDb:
    path: str  # the database web_db.build wrote
    tmp: str  # where the viewer puts its snapshot copies
    ids: dict[str, str]  # what web_db.build returns: the ids the tests look for


@pytest.fixture
def viewer_db(tmp_path, monkeypatch) -> ViewerDb:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    path = str(tmp_path / "log.db")
    return ViewerDb(path, str(tmp), web_db.build(path))
