"""The audit timeline's index: which session and routing key each stream of the log concerns,
and when each stretch of the log happened.

The log already holds every event in order, and its own index finds a stream's events; this
projection adds only what the log cannot answer by itself, so that it stays a small fraction of
the log and rebuilds at the speed of reading it:

- `timeline_streams`: each stream (aggregate) filed by its first event: its kind (that event's
  name), position, session, route and routing key. A route is filed under its key, an inbox under
  its route (so a key's history shows its inbound queue), any other stream under its session.
  A row is the stream's first position (its rowid), its id (a UUID as its 16 bytes: `pack_id`)
  and its filing, a small integer naming the (kind, session, route, key) it shares with other
  streams in `timeline_filings` (a session's deliveries all share one): about a fifth of the
  bytes of spelling them out on every row, with one index instead of three.
- `timeline_mentions`: for streams filed under a route, each session their events name, from the
  position it is first named (a route bound to three sessions over its life mentions three).
- `timeline_clock`: per block of CLOCK_BLOCK positions, the earliest and the latest event time
  in it (UTC text), so that "the last event at or before T" reads one block of the log, not all
  of it, even when writers' clocks interleave out of order.

The history of a key or a session (timeline_query.py) reads these rows, then the events of the
streams they name from the log.
"""

from __future__ import annotations

from bisect import bisect_right
from operator import itemgetter
from typing import Any
from uuid import UUID

from .base import Tables, event_name

CLOCK_BLOCK = 1024
_ROUTE_REGISTERED = "turnlog:RouteRegistered"
_position = itemgetter(0)


def clock_block(position: int) -> int:
    return (position - 1) // CLOCK_BLOCK


def pack_id(stream: str) -> Any:
    """A stream id as stored: a UUID's 16 bytes when it is one in canonical text, else the text."""
    try:
        packed = UUID(stream)
    except ValueError:
        return stream
    return packed.bytes if str(packed) == stream else stream


def unpack_id(value: Any) -> str:
    return str(UUID(bytes=value)) if type(value) is bytes else value


def filing(topic: str, stream: str, data: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(session_id, route_id, session_key) of a stream, from its first event's topic and data.

    The events of a stream filed under a route concern the session each of them names; those of
    any other stream concern the stream's session."""
    if topic == _ROUTE_REGISTERED:
        return None, stream, data.get("session_key")
    return data.get("session_id"), data.get("route_id"), data.get("session_key")


class TimelineProjection:
    name = "timeline"
    weight = 5.0  # rebuild cost relative to the others (parallel.py)
    version = 3  # 2: an index of streams and a clock instead of a copy of every event; 3: filings
    tables = ("timeline_streams", "timeline_filings", "timeline_mentions", "timeline_clock")
    retired = ("timeline",)
    topics: tuple[str, ...] = ()  # every event: the clock covers them all

    def create(self, t: Tables) -> None:
        t.execute(
            """CREATE TABLE IF NOT EXISTS {timeline_streams} (
                first_position INTEGER PRIMARY KEY,
                stream NOT NULL UNIQUE,
                filing INTEGER NOT NULL)"""
        )
        t.execute(
            """CREATE TABLE IF NOT EXISTS {timeline_filings} (
                id INTEGER PRIMARY KEY,
                kind TEXT NOT NULL,
                session_id TEXT,
                route_id TEXT,
                session_key TEXT,
                UNIQUE (kind, session_id, route_id, session_key))"""  # how the writer finds one
        )
        t.execute(
            """CREATE TABLE IF NOT EXISTS {timeline_mentions} (
                stream TEXT NOT NULL,
                session_id TEXT NOT NULL,
                first_position INTEGER NOT NULL,
                PRIMARY KEY (stream, session_id))"""
        )
        t.execute(
            """CREATE TABLE IF NOT EXISTS {timeline_clock} (
                block INTEGER PRIMARY KEY,
                min_at TEXT NOT NULL,
                max_at TEXT NOT NULL)"""
        )

    def create_indexes(self, t: Tables) -> None:
        t.execute("CREATE INDEX IF NOT EXISTS timeline_streams_by_filing ON {timeline_streams} (filing, first_position)")
        t.execute("CREATE INDEX IF NOT EXISTS timeline_filings_by_session ON {timeline_filings} (session_id)")
        t.execute("CREATE INDEX IF NOT EXISTS timeline_filings_by_route ON {timeline_filings} (route_id)")
        t.execute("CREATE INDEX IF NOT EXISTS timeline_filings_by_key ON {timeline_filings} (session_key, kind)")
        t.execute("CREATE INDEX IF NOT EXISTS timeline_mentions_by_session ON {timeline_mentions} (session_id)")

    def writer(self, t: Tables) -> "_TimelineWriter":
        return _TimelineWriter(t)


class _TimelineWriter:
    """Buffers new streams, mentions and clock blocks; a stream's filing is read at most once.

    It takes a batch of raw rows (runner._apply): most events need no decoding here, only their
    time, which the log reader reads from the stored bytes; the fields of a stream's first event
    and of the events of streams filed under a route (for the sessions they name) are decoded,
    unless another writer had decoded them.
    """

    buffers = True  # it only reads until flush()

    def __init__(self, t: Tables) -> None:
        self.t = t
        self.routed: dict[Any, bool] = {}  # the log's id of a stream -> filed under a route
        self.mentioned: set[tuple[str, str]] = set()
        self.new_streams: list[tuple[Any, ...]] = []
        self.filings: dict[tuple[str, str | None, str | None, str | None], int] = {}  # known filings' ids
        self.new_filings: list[tuple[Any, ...]] = []
        self.next_filing = 0  # read from the table on first use
        self.new_mentions: list[tuple[str, str, int]] = []
        self.clock: dict[int, list[str]] = {}  # block -> [earliest, latest] time, UTC text
        self.select_stream = t.sql("SELECT f.route_id FROM {timeline_streams} s JOIN {timeline_filings} f"
                                   " ON f.id = s.filing WHERE s.stream=?")
        self.select_filing = t.sql("SELECT id FROM {timeline_filings} WHERE kind=? AND session_id IS ?"
                                   " AND route_id IS ? AND session_key IS ?")
        self.select_mention = t.sql("SELECT 1 FROM {timeline_mentions} WHERE stream=? AND session_id=?")

    def apply_rows(self, rows: list[Any], decoded: list[Any], log: Any) -> None:
        self._time(rows, log)
        routed_streams = self.routed
        for row, fields in zip(rows, decoded):
            routed = routed_streams.get(row[1])
            if routed is None:
                fields = fields or log.fields(row)
                routed = routed_streams[row[1]] = self._routed(row[3], fields, row[0])
            if routed and log.has_field(row[3], "session_id"):
                fields = fields or log.fields(row)
                session_id = fields.get("session_id")
                stream = fields["originator_id"]
                if session_id and (stream, session_id) not in self.mentioned:
                    self._mention(stream, session_id, row[0])

    def _time(self, rows: list[Any], log: Any) -> None:
        """Widen each clock block by the times of the rows in it (rows come in position order)."""
        times = log.stored_times(rows)
        if None in times:
            times = [at or log.event_time(row) for at, row in zip(times, rows)]
        start = 0
        while start < len(rows):
            block = clock_block(rows[start][0])
            end = bisect_right(rows, (block + 1) * CLOCK_BLOCK, lo=start, key=_position)
            low, high = min(times[start:end]), max(times[start:end])
            known = self.clock.get(block)
            if known is None:
                self.clock[block] = [low, high]
            else:
                known[0], known[1] = min(known[0], low), max(known[1], high)
            start = end

    def _routed(self, topic: str, fields: dict[str, Any], position: int) -> bool:
        stream = fields["originator_id"]
        # A stream's first event has version 1; a later one's stream was filed by an earlier batch.
        found = None if fields["originator_version"] == 1 else \
            self.t.db.execute(self.select_stream, (pack_id(stream),)).fetchone()
        if found is None:
            session_id, route_id, key = filing(topic, stream, fields)
            self.new_streams.append((position, pack_id(stream),
                                     self._filing((event_name(topic), session_id, route_id, key))))
            found = (route_id,)
        return found[0] is not None

    def _filing(self, filed: tuple[str, str | None, str | None, str | None]) -> int:
        found = self.filings.get(filed)
        if found is None:
            row = self.t.db.execute(self.select_filing, filed).fetchone()
            if row is None:
                if not self.next_filing:
                    self.next_filing = self.t.execute(
                        "SELECT coalesce(max(id), 0) + 1 FROM {timeline_filings}").fetchone()[0]
                row = (self.next_filing,)
                self.next_filing += 1
                self.new_filings.append((row[0], *filed))
            found = self.filings[filed] = row[0]
        return found

    def _mention(self, stream: str, session_id: str, position: int) -> None:
        self.mentioned.add((stream, session_id))
        if self.t.db.execute(self.select_mention, (stream, session_id)).fetchone() is None:
            self.new_mentions.append((stream, session_id, position))

    def flush(self) -> None:
        if self.new_filings:
            self.t.executemany("INSERT INTO {timeline_filings} VALUES (?,?,?,?,?)", self.new_filings)
            self.new_filings = []
        if self.new_streams:
            self.t.executemany("INSERT INTO {timeline_streams} VALUES (?,?,?)", self.new_streams)
            self.new_streams = []
        if self.new_mentions:
            self.t.executemany("INSERT OR IGNORE INTO {timeline_mentions} VALUES (?,?,?)", self.new_mentions)
            self.new_mentions = []
        if self.clock:
            self.t.executemany(
                "INSERT INTO {timeline_clock} VALUES (?,?,?) ON CONFLICT (block) DO UPDATE SET"
                " min_at=min(min_at, excluded.min_at), max_at=max(max_at, excluded.max_at)",
                [(block, low, high) for block, (low, high) in self.clock.items()])
            self.clock = {}
