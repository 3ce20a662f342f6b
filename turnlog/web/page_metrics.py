"""/metrics: one scrape of the live database's metrics (`Turnlog.metrics()`), for Prometheus.

The pages read a snapshot copy, which an operator reloads; a scrape must be current, so it reads
the live file instead, opened read-only once (never a byte written): its counts are the read
models' as of their positions, and `turnlog_projection_lag_*` says how far behind the log those are.
"""

from __future__ import annotations

import threading
from typing import Any

from .. import Turnlog


class LiveMetrics:
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._t: Turnlog | None = None
        self._registry: Any = None

    def scrape(self) -> tuple[bytes, str]:
        """The exposition and its content type. InvalidRequest without the metrics extra."""
        with self._lock:
            if self._t is None:
                self._t = Turnlog(self.path, read_only=True, create=False)
                self._registry = self._t.metrics()
            from prometheus_client import CONTENT_TYPE_LATEST, generate_latest  # metrics() checked the extra

            return generate_latest(self._registry), CONTENT_TYPE_LATEST

    def close(self) -> None:
        with self._lock:
            if self._t is not None:
                self._t.close()
                self._t = None
