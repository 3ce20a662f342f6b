"""What a rebuild (rebuild.py) and its helper process (parallel.py) use of the runner that
catches the read models up (runner.py), so that neither imports the runner, which imports them."""

from __future__ import annotations

import sqlite3
import threading
from typing import Any, Protocol

from eventsourcing.application import Application

from ..storage.backend import Backend
from ..storage.log import LogReader
from .base import Projection
from .views_file import Target, WriteTransaction


class CatchingUp(Protocol):
    app: Application
    backend: Backend | None
    views_path: str
    db: sqlite3.Connection
    log: LogReader
    lock: threading.RLock
    projections: dict[str, Projection]

    def head(self) -> int: ...

    def positions(self) -> dict[str, int]: ...

    def rebuilding(self) -> dict[str, int]: ...

    def refuse_if_read_only(self, what: str) -> None: ...

    def write(self) -> WriteTransaction: ...

    def run_pass(self, target: Target, names: list[str], positions: dict[str, int], stop: int,
                 batch: int | None = None, kept: dict[str, tuple[Any, int]] | None = None) -> int: ...

    def drop_table(self, p: Projection, table: str) -> None: ...

    def table_names(self) -> set[str]: ...

    def fill_elsewhere(self, names: list[str], path: str, *, batch: int | None = None,
                       pause: float = 0.0) -> None: ...

    def opened_again(self) -> CatchingUp: ...

    def close(self) -> None: ...
