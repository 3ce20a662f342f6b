"""Counts of what the log holds that no other read model keeps (turns started and ended, repeats
refused): one row per (counter, label), so a metrics scrape reads them in one query in any
process, after any restart (its query: counts_views.py)."""

from __future__ import annotations

from typing import Any

from .base import Rows, Tables

TURNS_STARTED = "turns_started"
TURNS_ENDED = "turns_ended"  # label: the item's outcome (answered, failed, stopped, ...)
DUPLICATES_REFUSED = "duplicates_refused"  # label: why (message_id, same_text)


def _counted(topic: str, e: dict[str, Any]) -> tuple[str, str] | None:
    if topic == "turnlog:InboundStarted" or (topic == "turnlog:InboundAccepted" and e.get("turn_id")):
        return TURNS_STARTED, ""  # an accept that started its turn at once counts as a start
    if topic == "turnlog:InboundCompleted":
        return TURNS_ENDED, str(e["outcome"])
    if topic == "turnlog:InboundDuplicateRefused":
        return DUPLICATES_REFUSED, str(e["reason"])
    return None


class CountsProjection:
    name = "counts"
    weight = 0.5  # rebuild cost relative to the others (parallel.py)
    tables = ("event_counts",)
    topics = ("turnlog:InboundStarted", "turnlog:InboundAccepted", "turnlog:InboundCompleted",
              "turnlog:InboundDuplicateRefused")

    def create(self, t: Tables) -> None:
        t.execute("CREATE TABLE IF NOT EXISTS {event_counts} (counter TEXT NOT NULL, label TEXT NOT NULL,"
                  " value INTEGER NOT NULL, PRIMARY KEY (counter, label))")

    def create_indexes(self, t: Tables) -> None:
        pass

    def writer(self, t: Tables) -> "_CountsWriter":
        return _CountsWriter(t)


class _CountsWriter:
    buffers = True  # apply() only reads; it writes in flush()

    def __init__(self, t: Tables) -> None:
        self.rows = Rows(t, "event_counts", ("counter", "label", "value"), ("counter", "label"))

    def apply_fields(self, topic: str, e: dict[str, Any], position: int) -> None:
        key = _counted(topic, e)
        if key is None:
            return
        row = self.rows.get(key)
        if row is None:
            self.rows.new(key, value=1)
        else:
            row["value"] += 1

    def flush(self) -> None:
        self.rows.flush()
