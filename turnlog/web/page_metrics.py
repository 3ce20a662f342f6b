"""/metrics: one scrape of the live database's metrics (`Turnlog.metrics()`), for Prometheus.

The pages read a snapshot copy, which an operator reloads; a scrape must be current, so it reads
the live file instead, opened read-only once (never a byte written): its counts are the read
models' as of their positions, and `turnlog_projection_lag_*` says how far behind the log those are.

An open file stays readable after it is removed or renamed over (a `turnlog restore`), so each
scrape first checks that the path still names the file that is open (its device and inode): a
file put in its place is opened instead, and a path with no file any more is answered 404.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from .. import NotFound, Turnlog, local_file


class LiveMetrics:
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._t: Turnlog | None = None
        self._registry: Any = None
        self._file: tuple[int, int] | None = None  # (st_dev, st_ino) of the file open in _t

    def scrape(self) -> tuple[bytes, str]:
        """The exposition and its content type. InvalidRequest without the metrics extra."""
        with self._lock:
            try:
                st = os.stat(local_file(self.path).path)  # the file of a path or an sqlite:// URL
            except FileNotFoundError:
                was_open = self._t is not None
                if was_open:
                    self._close()
                raise NotFound(f"the database file {self.path} was removed" if was_open
                               else f"no database file {self.path}") from None
            if self._t is not None and (st.st_dev, st.st_ino) != self._file:
                self._close()  # replaced: the new file's figures, not the old one's
            if self._t is None:
                # Stat before open: a file replaced in between is seen (and reopened) next scrape.
                self._t = Turnlog(self.path, read_only=True, create=False)
                self._registry = self._t.metrics()
                self._file = (st.st_dev, st.st_ino)
            from prometheus_client import CONTENT_TYPE_LATEST, generate_latest  # metrics() checked the extra

            return generate_latest(self._registry), CONTENT_TYPE_LATEST

    def close(self) -> None:
        with self._lock:
            if self._t is not None:
                self._close()

    def _close(self) -> None:
        assert self._t is not None
        t, self._t, self._registry, self._file = self._t, None, None, None
        t.close()
