"""Reading the audit timeline: the history of a key or a session, and log positions of times.

Both read the timeline projection's small tables (timeline.py) to learn which streams and which
stretch of the log to read, then read those events from the log itself.
"""

from __future__ import annotations

from typing import Any, Iterable

import orjson

from ..domain.transcript import MessagesImported, imported_messages
from ..errors import TooLarge
from ..storage.log import Row
from ..storage.sql import rows_in, utc_text
from .base import event_name
from .runner import ProjectionRunner
from .timeline import CLOCK_BLOCK, pack_id, unpack_id

_STANDARD_FIELDS = {"originator_id", "originator_version", "timestamp", "originator_topic", "actor", "cause"}
_SUMMARISED_FIELDS = {"content": 80}
_IMPORTED = MessagesImported.TOPIC
_APPENDED = "MessageAppended"  # what an imported run's messages are listed as


def event_data(event: Any) -> dict[str, Any]:
    """An event's own fields as JSON values (times as ISO text), long message text shortened."""
    data = {}
    for name, value in event.__dict__.items():
        if name in _STANDARD_FIELDS:
            continue
        limit = _SUMMARISED_FIELDS.get(name)
        if limit is not None and isinstance(value, str) and len(value) > limit:
            value = value[:limit] + "…"
        data[name] = value
    return orjson.loads(orjson.dumps(data, default=str))


def history(runner: ProjectionRunner, *, session: str | None = None, route_ids: Iterable[str] = (),
            since: int | None = None, until: int | None = None, types: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Every event concerning a session, or the routes of a key and the sessions they served, in
    log order, within [since, until] and of the named event types if given.

    An event concerns the session of its stream, or for a stream filed under a route (a route, an
    inbox) the session it names. A key's history is its routes' events and every event of a
    session those events name. An imported run of messages (MessagesImported) is listed as the
    MessageAppended events it stands for, each at the run's position.
    """
    db = runner.db
    upto = runner.positions().get("timeline", 0)
    if until is not None:
        upto = min(upto, until)
    if session is not None:
        sessions = {session}
        routes: set[str] = set()
        streams = _streams(db, "session_id IN ({}) AND route_id IS NULL", [session])
        streams |= _column(db, "SELECT stream FROM timeline_mentions WHERE session_id=?", [session])
    else:
        routes = set(route_ids)
        streams = _streams(db, "route_id IN ({})", routes)
        sessions = _column_in(db, "SELECT session_id FROM timeline_mentions WHERE stream IN ({})", streams)
        streams |= _streams(db, "session_id IN ({}) AND route_id IS NULL", sessions)
        streams |= _column_in(db, "SELECT stream FROM timeline_mentions WHERE session_id IN ({})", sessions)
    filed = _filed(db, streams)
    names = set(types)
    out = []
    for row in runner.log.stream_rows(filed, upto):
        position, stream, topic = row[0], runner.log.stream_of(row), row[3]
        if (since is not None and position < since) or (names and event_name(topic) not in names and not (
                topic == _IMPORTED and _APPENDED in names)):
            continue
        stream_session, route_id, stream_key = filed[stream]
        event = runner.log.decode(row)
        session_id = getattr(event, "session_id", None) if route_id else stream_session
        if session_id not in sessions and route_id not in routes:
            continue
        for one in imported_messages(event) if topic == _IMPORTED else (event,):
            data = event_data(one)
            if one is not event:  # `at` is when the log recorded it; the message happened at its own time
                data["message_at"] = one.timestamp.isoformat()
            out.append({"position": position, "at": event.timestamp.isoformat(),
                        "event": _APPENDED if one is not event else event_name(topic),
                        "actor": getattr(one, "actor", None), "cause": getattr(one, "cause", None),
                        "session_id": session_id, "session_key": getattr(one, "session_key", None) or stream_key,
                        "data": data})
    return out


def position_at(runner: ProjectionRunner, moment: Any, *, after: bool = False) -> int | None:
    """The last log position whose event happened at or before `moment` (an aware datetime), or
    with `after` the first at or after it; None if there is none.

    The clock finds the one block that holds the answer: for `after`, the first block whose latest
    time reaches the moment (no earlier block has an event that late); then that block's events
    are read from the log.
    """
    stamp = utc_text(moment)
    if after:
        block = runner.db.execute("SELECT min(block) FROM timeline_clock WHERE max_at >= ?", (stamp,)).fetchone()[0]
    else:
        block = runner.db.execute("SELECT max(block) FROM timeline_clock WHERE min_at <= ?", (stamp,)).fetchone()[0]
    if block is None:
        return None
    upto = runner.positions().get("timeline", 0)
    rows = runner.log.read(block * CLOCK_BLOCK, min(upto, (block + 1) * CLOCK_BLOCK), CLOCK_BLOCK)
    times = [(row[0], runner.log.event_time(row)) for row in rows]
    found = [position for position, at in times if (at >= stamp if after else at <= stamp)]
    if not found:
        return None
    return found[0] if after else found[-1]


def time_of(runner: ProjectionRunner, position: int) -> str | None:
    """When the event at a position happened (ISO text), None outside the log."""
    rows = runner.log.read(position - 1, position, 1) if position > 0 else []
    return runner.log.decode(rows[0]).timestamp.isoformat() if rows else None


def sessions_touched(runner: ProjectionRunner, after: int, upto: int, *, key: str | None = None,
                     max_events: int | None = None) -> set[str]:
    """The sessions the events at after < position <= upto concern (only events of routing key
    `key` if given). With a key only the streams that can hold its events are read (key_streams);
    more than `max_events` events to read raises TooLarge before any is decoded."""
    if key is None:
        _bound(runner.log.count(after, upto), max_events, after, upto, key)
        rows: list[Row] = list(runner.log.scan(after, upto))
        filed = _filed(runner.db, {runner.log.stream_of(row) for row in rows})
    else:
        filed = key_streams(runner.db, key)
        rows = runner.log.stream_rows_between(filed, after, upto)
        _bound(len(rows), max_events, after, upto, key)
    touched = set()
    for row in rows:
        session_id, route_id, stream_key = filed.get(runner.log.stream_of(row), (None, None, None))
        if route_id or key is not None:
            event = runner.log.decode(row)
            if route_id:
                session_id = getattr(event, "session_id", None)
            if key is not None and (getattr(event, "session_key", None) or stream_key) != key:
                continue
        if session_id:
            touched.add(session_id)
    return touched


def _bound(events: int, max_events: int | None, after: int, upto: int, key: str | None) -> None:
    if max_events is not None and events > max_events:
        of = f" of key {key!r}" if key is not None else ""
        raise TooLarge(f"the diff from #{after} to #{upto} reads {events} events{of}, more than the limit of"
                       f" {max_events}: choose a shorter range or one key")


def key_streams(db: Any, key: str) -> dict[str, tuple[Any, ...]]:
    """The streams whose events can name routing key `key`, with their filing (session_id,
    route_id, session_key): those filed under the key (its routes, inboxes, deliveries, the
    sessions created under it), and the sessions ever bound to it (a session touched or reopened
    under the key names it in the session's own stream). Only these events carry `session_key`."""
    rows = db.execute(f"SELECT s.stream, f.session_id, f.route_id, f.session_key FROM {_FILED}"
                      " WHERE f.session_key = ?", (key,)).fetchall()
    rows += db.execute(f"SELECT s.stream, f.session_id, f.route_id, f.session_key FROM {_FILED}"
                       " WHERE f.kind = 'SessionCreated' AND f.route_id IS NULL AND f.session_id IN"
                       " (SELECT session_id FROM route_history WHERE session_key = ?)", (key,)).fetchall()
    return {unpack_id(row[0]): tuple(row[1:]) for row in rows}


def delivery_streams_of(runner: ProjectionRunner, sessions: Iterable[str], after: int,
                        upto: int) -> dict[str, list[str]]:
    """delivery_streams_changed for these sessions only, read through their streams."""
    filed = rows_in(runner.db, f"SELECT s.stream, f.session_id, s.first_position FROM {_FILED}"
                               " WHERE f.kind='DeliveryRecorded' AND f.session_id IN ({})", sessions)
    moved = {runner.log.stream_of(row) for row in runner.log.stream_rows_between(
        [unpack_id(stream) for stream, _, _ in filed], after, upto)}
    out: dict[str, list[str]] = {}
    for stream, session_id, _ in sorted(filed, key=lambda r: r[2]):
        if unpack_id(stream) in moved:
            out.setdefault(session_id, []).append(unpack_id(stream))
    return out


def delivery_streams_changed(runner: ProjectionRunner, after: int, upto: int) -> dict[str, list[str]]:
    """The delivery streams with an event at after < position <= upto, by session, each session's
    in log order of the deliveries' first events (a delivery with no event there is unchanged)."""
    streams = {runner.log.stream_of(row) for row in runner.log.scan(after, upto)}
    out: dict[str, list[str]] = {}
    for stream, session_id, _ in sorted(rows_in(
            runner.db, f"SELECT s.stream, f.session_id, s.first_position FROM {_FILED}"
                       " WHERE f.kind='DeliveryRecorded' AND s.stream IN ({})", map(pack_id, streams)),
            key=lambda r: r[2]):
        out.setdefault(session_id, []).append(unpack_id(stream))
    return out


# Each stream with its filing (timeline.py).
_FILED = "timeline_streams s JOIN timeline_filings f ON f.id = s.filing"


def _streams(db: Any, where: str, values: Iterable[Any]) -> set[str]:
    """The streams (as text) of the filings `where` selects (its `IN ({})` filled with `values`)."""
    return {unpack_id(row[0]) for row in rows_in(
        db, f"SELECT stream FROM timeline_streams WHERE filing IN (SELECT id FROM timeline_filings WHERE {where})",
        values)}


def _filed(db: Any, streams: Iterable[str]) -> dict[str, tuple[Any, ...]]:
    """stream -> (session_id, route_id, session_key) of each of these streams the timeline holds."""
    return {unpack_id(row[0]): row[1:] for row in rows_in(
        db, f"SELECT s.stream, f.session_id, f.route_id, f.session_key FROM {_FILED} WHERE s.stream IN ({{}})",
        map(pack_id, streams))}


def _column(db: Any, sql: str, params: list[Any]) -> set[Any]:
    return {row[0] for row in db.execute(sql, params)}


def _column_in(db: Any, sql: str, values: Iterable[Any]) -> set[Any]:
    return {row[0] for row in rows_in(db, sql, values)}


def sessions_created(db: Any, upto: int, *, key: str | None = None) -> list[str]:
    """Sessions created at or before log position `upto` (only routing key `key`'s), in log order."""
    where, params = ("", ()) if not key else (" AND f.session_key=?", (key,))
    return [r[0] for r in db.execute(f"SELECT f.session_id FROM {_FILED} WHERE f.kind='SessionCreated'"
                                     f" AND s.first_position<=?{where} ORDER BY s.first_position", (upto, *params))]


def streams_of_kind(db: Any, kind: str, upto: int, *, session_id: str | None = None,
                    session_key: str | None = None) -> list[str]:
    """The streams (aggregate ids as text) whose first event is `kind` (DeliveryRecorded,
    InboxOpened, ...) at or before `upto`, of one session or one routing key."""
    column, value = ("session_id", session_id) if session_id is not None else ("session_key", session_key)
    return [unpack_id(r[0]) for r in db.execute(f"SELECT s.stream FROM {_FILED} WHERE f.kind=? AND f.{column}=?"
                                                " AND s.first_position<=? ORDER BY s.first_position",
                                                (kind, value, upto))]


def all_streams_of_kind(db: Any, kind: str) -> list[str]:
    """Every stream (aggregate id as text) whose first event is `kind`, in log order."""
    return [unpack_id(r[0]) for r in db.execute(f"SELECT s.stream FROM {_FILED} WHERE f.kind=?"
                                                " ORDER BY s.first_position", (kind,))]


def session_streams(db: Any, session_ids: Iterable[str], *, leave_out: Iterable[str] = ()) -> dict[str, list[str]]:
    """The streams filed under each of these sessions (their own: the session, its transcript,
    lease, deliveries, ...; not its routes'), in log order, but those whose first event is one of
    `leave_out` (event names)."""
    skip = set(leave_out)
    out: dict[str, list[str]] = {}
    for stream, session_id, kind, _ in sorted(rows_in(
            db, f"SELECT s.stream, f.session_id, f.kind, s.first_position FROM {_FILED}"
                " WHERE f.route_id IS NULL AND f.session_id IN ({})", session_ids), key=lambda r: r[3]):
        if kind not in skip:
            out.setdefault(session_id, []).append(unpack_id(stream))
    return out
