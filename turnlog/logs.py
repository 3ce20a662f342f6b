"""Logging: turnlog logs through the standard `logging` module, under the `turnlog` logger (and
its children: `turnlog.turn`, `turnlog.lease`, `turnlog.delivery`), and adds no handler unless
asked. `configure()` adds one: plain lines, or JSON lines (one object per record, with the
record's turnlog fields: session_id, turn_id, owner, ...) for a log shipper. The environment
variable TURNLOG_LOG_JSON=1 chooses JSON when `json` is not given.
"""

from __future__ import annotations

import json as _json
import logging
import sys
from datetime import datetime, timezone
from typing import IO, Any

from .domain.env_flags import env_flag

LOGGER = "turnlog"
# What a LogRecord holds of its own; anything else was passed in `extra` and is the record's field.
_RECORD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonLines(logging.Formatter):
    """One JSON object per record: time (UTC, ISO), level, logger, message, the `extra` fields,
    and the exception's text when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update({k: v for k, v in vars(record).items() if k not in _RECORD_ATTRIBUTES})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return _json.dumps(out, default=str, ensure_ascii=False)


def configure(*, json: bool | None = None, level: int | str = logging.INFO,
              stream: IO[str] | None = None) -> logging.Handler:
    """Send turnlog's records at `level` and above to `stream` (stderr), as JSON lines or plain
    text; replaces the handler an earlier call added. Returns the handler."""
    if json is None:
        json = env_flag("TURNLOG_LOG_JSON")
    logger = logging.getLogger(LOGGER)
    for old in [h for h in logger.handlers if getattr(h, "turnlog_configured", False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLines() if json else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.turnlog_configured = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler
