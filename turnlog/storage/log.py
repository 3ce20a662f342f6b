"""Reading the committed log for the projections: raw rows in position order, decoded on demand.

When the read models live in the same SQLite file as the log (the embedded default), the rows
are read straight from the events table on the read-model connection: one plain SELECT per
batch, no per-row objects. Otherwise (PostgreSQL, or a separate file) the recorder's
`select_notifications` is used. Either way a row is `(position, originator_id, version, topic,
state)` and `decode(row)` gives the same domain event object as the library's mapper.
"""

from __future__ import annotations

import sqlite3
import typing
from dataclasses import dataclass
from operator import itemgetter
from datetime import datetime
from typing import Any, Iterable, Iterator, Sequence
from uuid import UUID

import orjson
from eventsourcing.application import Application
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import resolve_topic

from ..domain.sealing import SEALED_TAG
from .event_compressor import EventCompressor, inflate
from .sql import rows_in, utc_text

Row = tuple[int, Any, int, str, bytes]


@dataclass(frozen=True)
class LogAccess:
    """How the reader reaches the log's events table, as its backend says (backend.log_access):
    `same_file`: the table is in the read models' SQLite file and is read on their connection
    (`sql`); otherwise `sql` runs the reader's SQL on it (its own connection, or an adaptor), or
    is None: the library's notification API only. `owned`: `sql` closes with the reader."""

    same_file: bool = False
    sql: Any = None
    uuid_ids: bool = True
    table: str = "stored_events"
    owned: bool = False
_IDS_CACHED = 200_000
_from_iso = datetime.fromisoformat
_TIME_PREFIX = b'{"timestamp":{"_type_":"datetime_iso","_data_":"'
_SCAN_BATCH = 5000
_state = itemgetter(4)
_SEALED = b'"' + SEALED_TAG.encode() + b'"'  # a sealed field (sealing_mapper.py): only an encrypted log has one


class _Id(UUID):
    """A UUID that remembers its text: projections file rows under str(originator_id)."""

    __slots__ = ("_text",)
    _text: str

    def __init__(self, text: str) -> None:
        super().__init__(text)
        object.__setattr__(self, "_text", UUID.__str__(self))

    def __str__(self) -> str:
        return self._text


class LogReader:
    def __init__(self, app: Application, db: sqlite3.Connection, access: LogAccess | None = None) -> None:
        self.app = app
        self.db = db
        access = access or LogAccess()
        self.access = access
        self.table = access.table
        self.direct = access.same_file
        # SQL on the log's table (a stream's events by the log's own index); None: the log is
        # scanned through the library's API.
        self.sql = access.sql
        self.uuid_ids = access.uuid_ids
        mapper = app.mapper
        compressor = getattr(mapper, "compressor", None)
        # turnlog's own compressor is undone here (inflate); another one means decoding through the mapper.
        self.fast = self.direct and not getattr(mapper, "cipher", None) and (
            compressor is None or isinstance(compressor, EventCompressor))
        self.transcoder = mapper.transcoder
        # The transcoder's own tagged-value walk, when it is turnlog's; the top level is done here.
        self._untag = getattr(self.transcoder, "_untag", None)
        self.plans: dict[str, tuple[type | None, tuple[str, ...]]] = {}
        self._class_versions: dict[str, int] = {}  # a topic's current class_version (when not 1)
        self._ids: dict[str, UUID] = {}
        self._id_texts: dict[str, str] = {}  # the log's id of a stream -> str(its UUID)
        self._class_hints: dict[str, dict[str, Any] | None] = {}

    def close(self) -> None:
        if self.access.owned:
            self.sql.close()

    def head(self) -> int:
        if self.direct:
            return self.db.execute(f"SELECT max(rowid) FROM {self.table}").fetchone()[0] or 0
        return self.app.recorder.max_notification_id() or 0

    def read(self, after: int, stop: int, limit: int, topics: Sequence[str] = ()) -> list[Row]:
        """Rows with after < position <= stop, in order, at most `limit`; only `topics` if given."""
        limit = max(1, min(limit, stop - after))  # no more rows than positions: a huge batch binds in SQL
        if self.direct:
            where = f" AND topic IN ({','.join('?' * len(topics))})" if topics else ""
            return self.db.execute(
                f"SELECT rowid, originator_id, originator_version, topic, state FROM {self.table}"
                f" WHERE rowid > ? AND rowid <= ?{where} ORDER BY rowid LIMIT ?",
                (after, stop, *topics, limit)).fetchall()
        notifications = self.app.recorder.select_notifications(after, limit, stop=stop, topics=list(topics),
                                                               inclusive_of_start=False)
        return [(n.id, n.originator_id, n.originator_version, n.topic, n.state) for n in notifications]

    def scan(self, after: int, stop: int, topics: Sequence[str] = ()) -> Iterator[Row]:
        """Every row with after < position <= stop, in order, read in batches."""
        while after < stop:
            rows = self.read(after, stop, _SCAN_BATCH, topics)
            yield from rows
            if len(rows) < _SCAN_BATCH:
                return
            after = rows[-1][0]

    def stream_rows(self, streams: Iterable[str], upto: int) -> list[Row]:
        """The rows of these streams (aggregate ids as text) at positions <= upto, in order."""
        wanted = {self._stored(stream) for stream in streams}
        if self.sql is None:
            return [row for row in self.scan(0, upto) if self._stored(str(row[1])) in wanted]
        return sorted(rows_in(self.sql, f"SELECT rowid, originator_id, originator_version, topic, state"
                                        f" FROM {self.table} WHERE originator_id IN ({{}}) AND rowid <= ?",
                              wanted, upto))

    def stream_rows_between(self, streams: Iterable[str], after: int, upto: int) -> list[Row]:
        """The rows of these streams at after < position <= upto, in order (the log's stream index
        finds them: no other row is read)."""
        wanted = {self._stored(stream) for stream in streams}
        if self.sql is None:
            return [row for row in self.scan(after, upto) if self._stored(str(row[1])) in wanted]
        return sorted(rows_in(self.sql, f"SELECT rowid, originator_id, originator_version, topic, state"
                                        f" FROM {self.table} WHERE originator_id IN ({{}}) AND rowid > ?"
                                        " AND rowid <= ?", wanted, after, upto))

    def stream_version(self, stream: str, upto: int) -> int | None:
        """The version a stream had reached at position upto (None: it did not exist yet)."""
        if self.sql is None:
            versions = [row[2] for row in self.stream_rows([stream], upto)]
            return versions[-1] if versions else None
        return self.sql.execute(f"SELECT max(originator_version) FROM {self.table} WHERE originator_id=?"
                                " AND rowid <= ?", (self._stored(stream), upto)).fetchone()[0]

    def fields_at(self, positions: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The fields (`fields`) of the events at these positions."""
        wanted = set(positions)
        if self.sql is None:
            return {row[0]: self.fields(row) for row in self.scan(0, max(wanted, default=0)) if row[0] in wanted}
        rows = rows_in(self.sql, f"SELECT rowid, originator_id, originator_version, topic, state"
                                 f" FROM {self.table} WHERE rowid IN ({{}})", wanted)
        return {row[0]: self.fields(row) for row in rows}

    def count(self, after: int, stop: int) -> int:
        """How many events lie at after < position <= stop."""
        if self.sql is None:
            return sum(1 for _ in self.scan(after, stop))
        return self.sql.execute(f"SELECT count(*) FROM {self.table} WHERE rowid > ? AND rowid <= ?",
                                (after, stop)).fetchone()[0]

    def stream_of(self, row: Row) -> str:
        """A row's stream as text, as projections file it (str of the aggregate id)."""
        originator_id = row[1]
        return str(self._id(originator_id)) if self.uuid_ids and isinstance(originator_id, str) else str(originator_id)

    def _stored(self, stream: str) -> str:
        """A stream's id as the log's table holds it (SQLite: a UUID's hex)."""
        return UUID(stream).hex if self.uuid_ids else stream

    def stored_time(self, row: Row) -> str | None:
        """The event's time as fixed-width UTC text (base.utc_text) read straight from its stored
        bytes, when turnlog's transcoder stored it there first, in UTC, with microseconds (as
        it does for every event it writes); None otherwise (then decode the event)."""
        return self.stored_times((row,))[0]

    def stored_times(self, rows: Sequence[Row]) -> list[str | None]:
        """stored_time of each row (one pass, for a batch)."""
        if self._untag is None:
            return [None] * len(rows)
        start = len(_TIME_PREFIX)
        dot, utc, end = slice(start + 19, start + 20), slice(start + 26, start + 33), start + 32
        return [state[start:end].decode() if state[dot] == b"." and state[utc] == b'+00:00"'
                and state.startswith(_TIME_PREFIX) else None for state in map(inflate, map(_state, rows))]

    def event_time(self, row: Row, event: Any = None) -> str:
        """The event's time as fixed-width UTC text: from its stored bytes, or decoded."""
        return self.stored_time(row) or utc_text((event or self.decode(row)).timestamp)

    def decode(self, row: Row) -> Any:
        """The domain event of a row, as the library's mapper would give it."""
        stored = self._stored_fields(row)
        if stored is not None:
            data, cls, times = stored
            for name in times:
                data[name] = _from_iso(data[name])
            data["originator_id"] = self._id(row[1]) if self.uuid_ids else row[1]
            event: Any = object.__new__(cls)
            object.__setattr__(event, "__dict__", data)
            return event
        _, originator_id, version, topic, state = row
        if self.uuid_ids and isinstance(originator_id, str):
            originator_id = UUID(originator_id)
        stored_event = StoredEvent(originator_id=originator_id, originator_version=version, topic=topic, state=state)
        return self.app.mapper.to_domain_event(stored_event)

    def fields(self, row: Row) -> dict[str, Any]:
        """A row's event as a dict of its fields, cheaper than the event: its times (top-level
        datetime fields) as their ISO text, exactly what `isoformat()` gives, and its stream id
        as text (`str(originator_id)`); other values as the event holds them. Projections that
        store times as text read these."""
        stored = self._stored_fields(row)
        if stored is not None:
            data = stored[0]
            originator_id = row[1]
            data["originator_id"] = (self._id_texts.get(originator_id) or str(self._id(originator_id))) \
                if self.uuid_ids else str(originator_id)
            return data
        event = self.decode(row)
        data = {name: value.isoformat() if isinstance(value, datetime) else value
                for name, value in event.__dict__.items()}
        data["originator_id"] = str(event.originator_id)
        return data

    def _stored_fields(self, row: Row) -> tuple[dict[str, Any], type, list[str]] | None:
        """The event's stored fields with its tagged times as their text (and which fields they
        are), its other tagged values decoded, when the fast path applies (turnlog's transcoder,
        no cipher, no compressor, the class's current version, uuid ids as text); None otherwise."""
        _, originator_id, version, topic, state = row
        plan = self.plans.get(topic)
        if plan is None:
            plan = self.plans[topic] = self._plan(topic)
        cls, times = plan
        if cls is None or (self.uuid_ids and not isinstance(originator_id, str)):
            return None
        state = inflate(state)
        data = orjson.loads(state)
        if data.pop("class_version", 1) != self._class_versions.get(topic, 1):
            return None  # an older version: the mapper's upcasters decode it
        if _SEALED in state:
            self.app.mapper.sealer.unseal(topic, data, False)  # type: ignore[attr-defined]
        tags = state.count(b'"_type_"')
        converted = []
        for name in times:
            value = data.get(name)
            if type(value) is dict and value.get("_type_") == "datetime_iso":
                data[name] = value["_data_"]
                converted.append(name)
                tags -= 1
        if tags:
            self._untag_rest(data)
        data["originator_version"] = version
        return data, cls, converted

    def has_field(self, topic: str, name: str) -> bool:
        """Whether events of this topic have a field `name` (True when the class cannot tell)."""
        hints = self._hints(topic)
        return hints is None or name in hints

    def _hints(self, topic: str) -> dict[str, Any] | None:
        """The annotated fields of a topic's event class (None: the class or its annotations
        cannot be resolved)."""
        if topic not in self._class_hints:
            try:
                self._class_hints[topic] = typing.get_type_hints(resolve_topic(topic))
            except Exception:
                self._class_hints[topic] = None
        return self._class_hints[topic]

    def _untag_rest(self, data: dict[str, Any]) -> None:
        """Tagged values besides the known top-level times: the transcoder's own walk."""
        untag = self._untag
        assert untag is not None  # only called where the transcoder has its walk
        for name, value in data.items():
            if type(value) is dict or type(value) is list:
                data[name] = untag(value)

    def _id(self, text: str) -> UUID:
        found = self._ids.get(text)
        if found is None:
            if len(self._ids) >= _IDS_CACHED:
                self._ids.clear()
                self._id_texts.clear()
            found = self._ids[text] = _Id(text)
            self._id_texts[text] = str(found)
        return found

    def _plan(self, topic: str) -> tuple[type | None, tuple[str, ...]]:
        """How to decode a topic's events: its class and its fields typed as times, or no class
        (decode with the library's mapper: an encrypted or compressed log, a transcoder other than
        turnlog's; an event of an older class_version also goes to the mapper, for its upcasters)."""
        if not self.fast or self._untag is None:
            return None, ()
        cls = resolve_topic(topic)
        version = getattr(cls, "class_version", 1)
        if version != 1:
            self._class_versions[topic] = version  # events stored at this version need no upcasting
        hints = self._hints(topic) or {}  # unresolvable annotations: the walk finds every tagged value anyway
        return cls, tuple(name for name, hint in hints.items()
                          if hint is datetime or datetime in typing.get_args(hint))
