"""turnlog's eventsourcing application and the topics every backend configures it with
(backend.py opens it on a location)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.application import Application, ProcessingEvent
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import Recording

from ..domain.inbox import Inbox
from ..domain.lease import TurnLease
from ..domain.route import Route
from ..domain.session import Session

SQLITE_FACTORY = "turnlog.storage.sqlite_factory:TurnlogSQLiteFactory"
TRANSCODER = "turnlog.storage.transcoder:OrjsonTranscoder"
COMPRESSOR = "turnlog.storage.event_compressor:EventCompressor"
MAPPER = "turnlog.storage.sealing_mapper:SealingMapper"  # seals when a key is attached (encryption.py)


class TurnlogApplication(Application):
    name = "turnlog"
    snapshotting_intervals = {Session: 100, Route: 100, TurnLease: 100, Inbox: 100}

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording]:
        """The library's save, without its per-object runtime Protocol checks (about a third of
        the cost of a small save) and snapshotting the saved aggregate instead of reloading it.
        Events go through the public event store (`events.put`); no repository cache is in use."""
        return self.put_collected(self.collect(*objs), **kwargs)

    @staticmethod
    def collect(*objs: Any) -> ProcessingEvent:
        """The pending events of `objs` (aggregates or events), taken off the aggregates."""
        processing: ProcessingEvent[UUID] = ProcessingEvent()
        for obj in objs:
            if isinstance(obj, Aggregate):
                processing.events.extend(obj.collect_events())
                processing.aggregates[obj.id] = obj
            elif obj is not None:
                processing.events.append(obj)
        return processing

    def put_collected(self, processing: ProcessingEvent, **kwargs: Any) -> list[Recording]:
        processing.saved_kwargs.update(kwargs)
        recordings = self.events.put(processing.events, **processing.saved_kwargs)
        self.snapshot_saved(processing)
        return recordings

    def put_group(self, group: list[ProcessingEvent]) -> list[list[Recording]]:
        """Several saves' events in one transaction (group_commit.py): all of them or none; each
        save's recordings, in order. Their snapshots are left to `snapshot_saved`, save by save,
        so that a snapshot's failure cannot pass for the failure of the events' transaction."""
        recordings = self.events.put([event for processing in group for event in processing.events])
        split, start = [], 0
        for processing in group:
            split.append(recordings[start:start + len(processing.events)])
            start += len(processing.events)
        return split

    def stream_version(self, originator_id: UUID) -> int:
        """The version a stream has reached in the log (0: none of its events yet), without
        decoding its last event."""
        last = self.recorder.select_events(originator_id, desc=True, limit=1)
        return int(last[0].originator_version) if last else 0

    def snapshot_saved(self, processing: ProcessingEvent) -> None:
        """Snapshot the saved aggregates whose new version is on a snapshotting interval."""
        if self.snapshots is None:
            return
        for event in processing.events:
            aggregate = processing.aggregates.get(event.originator_id)
            if aggregate is None:
                continue
            interval = self.snapshotting_intervals.get(type(aggregate))
            if interval is None or event.originator_version % interval:
                continue
            if aggregate.version == event.originator_version:
                snapshot_class = getattr(type(aggregate), "Snapshot", type(self).snapshot_class)
                assert snapshot_class is not None  # snapshotting is on (self.snapshots)
                self.snapshots.put([snapshot_class.take(aggregate)])
            else:
                self.take_snapshot(event.originator_id, version=event.originator_version)
