"""The audit timeline: every event with its position, time, actor, cause and data, by stream.

Each row is filed under the session and the routing key it concerns, so that `history` of a
key or of a session is one indexed read. Transcript text is summarised, not copied: the log
holds it and the search projection indexes it.
"""

from __future__ import annotations

from typing import Any

import orjson

from .base import Tables, event_name, topic_of

_STANDARD_FIELDS = {"originator_id", "originator_version", "timestamp", "originator_topic", "actor", "cause"}
_SUMMARISED_FIELDS = {"content": 80}


def event_data(event: Any) -> dict[str, Any]:
    data = {}
    for name, value in event.__dict__.items():
        if name in _STANDARD_FIELDS:
            continue
        limit = _SUMMARISED_FIELDS.get(name)
        if limit is not None and isinstance(value, str) and len(value) > limit:
            value = value[:limit] + "…"
        data[name] = value
    return data


class TimelineProjection:
    name = "timeline"
    tables = ("timeline", "timeline_streams")
    topics: tuple[str, ...] = ()  # every event

    def create(self, t: Tables) -> None:
        t.execute(
            """CREATE TABLE IF NOT EXISTS {timeline} (
                position INTEGER PRIMARY KEY,
                at TEXT NOT NULL,
                event TEXT NOT NULL,
                actor TEXT,
                cause TEXT,
                stream TEXT NOT NULL,
                version INTEGER NOT NULL,
                session_id TEXT,
                route_id TEXT,
                session_key TEXT,
                data TEXT NOT NULL)"""
        )
        t.execute(
            """CREATE TABLE IF NOT EXISTS {timeline_streams} (
                stream TEXT PRIMARY KEY, session_id TEXT, route_id TEXT, session_key TEXT)"""
        )

    def create_indexes(self, t: Tables) -> None:
        t.execute("CREATE INDEX IF NOT EXISTS timeline_by_session ON {timeline} (session_id, position)")
        t.execute("CREATE INDEX IF NOT EXISTS timeline_by_route ON {timeline} (route_id, position)")
        t.execute("CREATE INDEX IF NOT EXISTS timeline_by_key ON {timeline} (session_key, position)")
        # A stream's version as of a position (time travel: `at`, `diff`, `fork`) is one range read.
        t.execute("CREATE INDEX IF NOT EXISTS timeline_by_stream ON {timeline} (stream, position)")

    def writer(self, t: Tables) -> "_TimelineWriter":
        return _TimelineWriter(t)


class _TimelineWriter:
    """Rows are buffered and inserted with one executemany; a stream's filing is read at most once."""

    buffers = True  # apply() only reads; it writes in flush()

    def __init__(self, t: Tables) -> None:
        self.t = t
        self.streams: dict[str, tuple[Any, Any, Any]] = {}
        self.new_streams: list[tuple[Any, ...]] = []
        self.rows: list[tuple[Any, ...]] = []
        self.select_stream = t.sql("SELECT session_id, route_id, session_key FROM {timeline_streams} WHERE stream=?")

    def _filing(self, stream: str, topic: str, data: dict[str, Any]) -> tuple[Any, Any, Any]:
        row = self.streams.get(stream)
        if row is None:
            row = self.t.db.execute(self.select_stream, (stream,)).fetchone()
            if row is None:
                # A stream is filed by its first event: a route by its key, an inbox by its route (so a
                # key's history shows its inbound queue), any other by its session.
                is_route = topic == "turnlog:RouteRegistered"
                row = (None if is_route else data.get("session_id"), stream if is_route else data.get("route_id"),
                       data.get("session_key"))
                self.new_streams.append((stream, *row))
            self.streams[stream] = row
        return row

    def apply(self, event: Any, position: int) -> None:
        stream = str(event.originator_id)
        data = event_data(event)
        topic = topic_of(event)
        stream_session, route_id, session_key = self._filing(stream, topic, data)
        session_id = data.get("session_id") if route_id else stream_session
        self.rows.append(
            (position, event.timestamp.isoformat(), event_name(topic), getattr(event, "actor", None),
             getattr(event, "cause", None), stream, event.originator_version, session_id, route_id,
             data.get("session_key") or session_key, orjson.dumps(data, default=str).decode()))

    def flush(self) -> None:
        if self.new_streams:
            self.t.executemany("INSERT INTO {timeline_streams} VALUES (?,?,?,?)", self.new_streams)
            self.new_streams = []
        if self.rows:
            self.t.executemany(
                "INSERT INTO {timeline} (position, at, event, actor, cause, stream, version, session_id, route_id,"
                " session_key, data) VALUES (?,?,?,?,?,?,?,?,?,?,?)", self.rows)
            self.rows = []
