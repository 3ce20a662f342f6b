"""The backend contract: every test in this folder runs once on an SQLite file and once on a
PostgreSQL log (a throwaway server, tests/postgres_server.py), through the same public API.

A `Backend` names where the log lives (`db`) and how each gateway keeps its read models: beside
the log in the SQLite file, or in a read-model file of its own for PostgreSQL, as a gateway on
another machine would. `make_turnlog` (the same factory as tests/conftest.py) opens gateways on it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from postgres_server import create_database, server
from turnlog import SequentialIds, Turnlog

_databases = itertools.count()


@dataclass
class Backend:
    kind: str
    db: str
    folder: Path
    _views: Iterator[int]

    def views(self) -> str | None:
        """A fresh read-model file for one more gateway (None on SQLite: the file holds them)."""
        if self.kind == "sqlite":
            return None
        return str(self.folder / f"views-{next(self._views)}.db")

    def views_prefix(self) -> str | None:
        """For child processes (tests/harness/procs.py): each makes its own read-model file."""
        return None if self.kind == "sqlite" else str(self.folder / "child-views")


@pytest.fixture(scope="session")
def postgres_prefix() -> Iterator[str]:
    with server() as prefix:
        yield prefix


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request, tmp_path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", str(tmp_path / "turnlog.db"), tmp_path, itertools.count())
    url = create_database(request.getfixturevalue("postgres_prefix"), f"contract_{next(_databases)}")
    return Backend("postgresql", url, tmp_path, itertools.count())


@pytest.fixture
def db(backend) -> str:
    return backend.db


@pytest.fixture
def make_turnlog(backend, clock) -> Iterator[Callable[..., Turnlog]]:
    opened: list[Turnlog] = []

    def make(**options: Any) -> Turnlog:
        options.setdefault("clock", clock)
        options.setdefault("session_ids", SequentialIds())
        options.setdefault("views", backend.views())
        engine = Turnlog(backend.db, **options)
        opened.append(engine)
        return engine

    yield make
    for engine in reversed(opened):
        engine.close()
