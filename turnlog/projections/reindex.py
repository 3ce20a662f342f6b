"""Rebuilding a read model's full-text indexes from its own rows, without reading the log.

What Hermes' `rebuild_fts` does, and all a damaged index needs while the rows it indexes are
sound; a read model that is behind the log or missing needs a rebuild from the log instead
(rebuild.py). One transaction, under the lock every rebuild takes, so it never runs beside one.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import InvalidRequest, StoreError
from . import parallel
from .base import Tables
from .runner_protocol import CatchingUp


def reindex(runner: CatchingUp, name: str) -> dict[str, Any]:
    """Rebuild the full-text indexes of projection `name` from its rows; returns what each index
    now holds (the projection's counts) and `seconds`."""
    rebuild_indexes = getattr(runner.projections[name], "reindex", None)
    if rebuild_indexes is None:
        raise InvalidRequest(f"the {name} read model has no full-text index to rebuild")
    runner.refuse_if_read_only(f"rebuilding the {name} full-text indexes")
    started = time.perf_counter()
    with runner.lock, parallel.rebuild_lock(runner):
        _refuse_unless_current(runner, name)  # before waiting for the write lock, and again holding it
        with runner.write():
            _refuse_unless_current(runner, name)
            counts = rebuild_indexes(Tables(runner.db))
    return {"projection": name, **counts, "seconds": round(time.perf_counter() - started, 4)}


def _refuse_unless_current(runner: CatchingUp, name: str) -> None:
    """StoreError unless the projection's tables exist and hold every event of the log."""
    missing = [table for table in runner.projections[name].tables if table not in runner.table_names()]
    position, head = runner.positions().get(name, 0), runner.head()
    if missing or position < head:
        state = f"has no table {missing[0]}" if missing else f"is at position {position} of the log's {head}"
        raise StoreError(f"the {name} read model {state}: its rows are not the log's, so rebuild it"
                         f" from the log instead (turnlog rebuild {name})")
