"""import-hermes pauses Python's cyclic garbage collector while it runs (a speed measure, see
turnlog/hermes/importer.py); the process must get its collector back as it was, also when the
import fails half-way."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from harness.hermes_home import fixture_home

from turnlog import ManualClock, Turnlog
from turnlog.domain.session import Session


def open_engine(path: Path) -> Turnlog:
    return Turnlog(str(path), clock=ManualClock("2026-12-01T00:00:00+00:00"))


def test_collection_resumes_after_an_import(tmp_path: Path) -> None:
    seen: list[bool] = []
    with open_engine(tmp_path / "t.db") as t:
        report = t.import_hermes(fixture_home(), progress=lambda done, total: seen.append(gc.isenabled()))
    assert report.sessions_imported == 14
    assert seen and not any(seen)  # paused while importing
    assert gc.isenabled()


def test_a_process_without_collection_keeps_it_off(tmp_path: Path) -> None:
    gc.disable()
    try:
        with open_engine(tmp_path / "t.db") as t:
            t.import_hermes(fixture_home())
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_collection_resumes_when_the_import_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(Session, "new", broken)
    with open_engine(tmp_path / "t.db") as t:
        with pytest.raises(RuntimeError, match="disk on fire"):
            t.import_hermes(fixture_home())
    assert gc.isenabled()
