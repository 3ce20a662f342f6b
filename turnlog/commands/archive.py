"""Archiving sessions out of the hot log into an archive file, and restoring them.

An archive run: the sessions retention picks (domain/retention.py) have their streams (those the
timeline files under them: session, transcript, lease, deliveries, usage, ...) read from the log
with each event's chain seal, and written to the archive file (storage/archive_file.py), which
is fsynced and read back. Then ONE transaction appends SessionsArchived (and a SessionArchived
per session) and deletes those events from the log (storage/recorder.py `remove_rows`): a
SIGKILL anywhere leaves the sessions in the log (at worst an archive file nothing refers to)
or archived, never neither. The read models refill themselves when they meet the event
(projections/runner.py). A restore puts the rows back at their positions, checked against the
seals the chain kept, in the transaction of SessionsRestored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable
from uuid import UUID

import orjson
from eventsourcing.persistence import IntegrityError

from ..domain.archive import (SessionArchived, SessionRestored, SessionsArchived, SessionsRestored, archive_stream,
                              archived_session_stream, seals_digest)
from ..domain.retention import Retention, SessionFacts, archivable, position_runs, run_positions
from ..domain.session import session_stream
from ..errors import ConflictError, InvalidRequest, StoreError
from ..projections.base import TypedRow
from ..projections.views import Views
from ..storage import archive_file
from ..storage.archive_file import ArchivedEvent
from ..storage.recorder import SealingRecorder
from .context import CommandContext

# Streams filed under a session that are not its alone (a title names one session at a time, a
# delegation's handle is the gateway's), and its archive records: they stay in the hot log.
LEAVE_OUT = ("TitleClaimed", "DelegationStarted", "SessionArchived")
STEPS = 3  # archive written, log changed, read models refilled
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class ArchiveCandidate(TypedRow):
    """A session retention would archive now: why (`rule`: "ended" or "idle") and its times."""
    session_id: str
    session_key: str
    rule: str
    ended_at: str | None
    last_change: str


@dataclass(frozen=True)
class ArchiveReport(TypedRow):
    """What an archive run did (`dry_run`: would do): the `sessions`, their `events`, the file
    (`path`, `sha256`, `bytes`), the log position of SessionsArchived (`position`), and the
    database file's size before and after space was reclaimed."""
    path: str
    dry_run: bool
    sessions: list[ArchiveCandidate]
    events: int = 0
    sha256: str | None = None
    bytes: int | None = None
    position: int | None = None
    db_bytes_before: int | None = None
    db_bytes_after: int | None = None


@dataclass(frozen=True)
class ArchiveRestoreReport(TypedRow):
    """An archive brought back: its `sessions` and `events`, or `already_restored` (nothing done)."""
    path: str
    sha256: str
    sessions: list[str]
    events: int
    already_restored: bool = False
    position: int | None = None
    missing: list[str] = field(default_factory=list)


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


class ArchiveCommands:
    def __init__(self, ctx: CommandContext, views: Views) -> None:
        self.ctx = ctx
        self.views = views

    def require_sqlite(self) -> SealingRecorder:
        recorder = self.ctx.app.recorder
        if not isinstance(recorder, SealingRecorder):
            raise InvalidRequest("archiving sessions needs an SQLite log (a PostgreSQL log keeps every session)")
        return recorder

    # -- which sessions ------------------------------------------------------------------------

    def candidates(self, policy: Retention) -> list[ArchiveCandidate]:
        """The sessions `policy` makes archivable now, in creation order (the read models, caught up)."""
        self.views.refresh()
        held = {lease.session_id for lease in self.views.held_leases()}
        owed = {d.session_id for d in self.views.owed_deliveries()}
        rows = self.views.sessions()
        facts = [SessionFacts(r.session_id, r.routed, _time(r.ended_at), r.suspended,
                              _time(r.updated_at) or _time(r.created_at) or self.ctx.clock.now(),
                              holds_lease=r.session_id in held, owes_delivery=r.session_id in owed,
                              archived=r.archived) for r in rows]
        rules = dict(archivable(facts, self.ctx.clock.now(), policy))
        return [ArchiveCandidate(r.session_id, r.session_key, rules[r.session_id], r.ended_at, r.updated_at)
                for r in rows if r.session_id in rules]

    # -- archive -------------------------------------------------------------------------------

    def archive(self, out: str, policy: Retention, *, db_identity: dict[str, Any], actor: str, cause: str,
                dry_run: bool = False, progress: Progress | None = None) -> ArchiveReport:
        recorder = self.require_sqlite()
        chosen = self.candidates(policy)
        if dry_run or not chosen:
            return ArchiveReport(path=out, dry_run=dry_run, sessions=chosen)
        ids = [c.session_id for c in chosen]
        streams = self.views.session_streams(ids, leave_out=LEAVE_OUT)
        session_of = {stream: sid for sid, owned in streams.items() for stream in owned}
        rows = self.views.stream_rows(session_of)
        seals = recorder.seals([row[0] for row in rows])
        events = [ArchivedEvent(row[0], str(row[1]), row[2], row[3], bytes(row[4]), seals[row[0]]) for row in rows]
        mine: dict[str, list[ArchivedEvent]] = {sid: [] for sid in ids}
        for e in events:
            mine[session_of[str(UUID(e.originator_id))]].append(e)
        listed = {sid: self.views.session(sid) for sid in ids}
        now = self.ctx.clock.now()
        positions = position_runs([e.position for e in events])
        digest = seals_digest((e.position, e.seal) for e in events)
        manifest = {
            "created_at": now.isoformat(), "database": db_identity, "actor": actor, "cause": cause,
            "positions": positions, "seals_digest": digest,
            "sessions": [{"session_id": c.session_id, "session_key": c.session_key, "rule": c.rule,
                          "events": len(mine[c.session_id]), "positions": position_runs([e.position for e in mine[c.session_id]]),
                          "digest": archive_file.stream_digest(mine[c.session_id])} for c in chosen],
        }
        written = archive_file.write(out, manifest, events)
        try:
            _step(progress, 1)
            name = os.path.abspath(out)
            recorded: list[Any] = [SessionsArchived(
                originator_id=archive_stream(written.sha256), originator_version=1, timestamp=now, sessions=ids,
                archive_sha256=written.sha256, archive_file=name, events=len(events), positions=positions,
                seals_digest=digest, actor=actor, cause=cause)]
            for c in chosen:
                row = listed[c.session_id]
                stream = archived_session_stream(c.session_id)
                recorded.append(SessionArchived(
                    originator_id=stream, originator_version=self.ctx.app.stream_version(stream) + 1, timestamp=now,
                    session_id=c.session_id, session_key=c.session_key, archive_sha256=written.sha256,
                    archive_file=name, row=_listing(row.to_dict() if row is not None else {}), actor=actor, cause=cause))
            try:
                position = self.ctx.save(*recorded, remove_rows=[(e.position, e.originator_id) for e in events])
            except (IntegrityError, ConflictError) as e:
                raise ConflictError(f"the sessions changed while they were archived: nothing was archived ({e})") from None
        except BaseException:  # Ctrl-C, a locked or failing disk, a conflict: the log may be as it was
            if not list(self.ctx.app.events.get(archive_stream(written.sha256))):
                os.remove(out)  # nothing refers to it (recorded, it would hold the only copy of the events)
            raise
        self._forget(ids)
        _step(progress, 2)
        self.views.refresh()  # the read models refill from the log without the archived events
        _step(progress, 3)
        return ArchiveReport(path=out, dry_run=False, sessions=chosen, events=len(events), sha256=written.sha256,
                             bytes=os.path.getsize(out), position=position)

    # -- restore -------------------------------------------------------------------------------

    def restore(self, path: str, *, actor: str, cause: str, progress: Progress | None = None) -> ArchiveRestoreReport:
        self.require_sqlite()
        archive = archive_file.read(path)
        _step(progress, 1)
        stream = archive_stream(archive.sha256)
        recorded: list[Any] = list(self.ctx.app.events.get(stream))
        sessions = [s["session_id"] for s in archive.manifest.get("sessions", [])]
        if not recorded:
            raise InvalidRequest(f"{path} is not an archive of this database (its sha256 {archive.sha256[:12]}…"
                                 " was never recorded here)")
        if isinstance(recorded[-1], SessionsRestored):
            return ArchiveRestoreReport(path=path, sha256=archive.sha256, sessions=sessions, events=0,
                                        already_restored=True)
        archived = recorded[-1]
        if [e.position for e in archive.events] != run_positions(archived.positions):
            raise StoreError(f"{path} does not hold the events its SessionsArchived event took from the log")
        by_session: dict[str, list[ArchivedEvent]] = {}
        for entry in archive.manifest["sessions"]:
            wanted = set(run_positions(entry["positions"]))
            by_session[entry["session_id"]] = [e for e in archive.events if e.position in wanted]
            if archive_file.stream_digest(by_session[entry["session_id"]]) != entry["digest"]:
                raise StoreError(f"{path} is damaged: session {entry['session_id']}'s events do not match its digest")
        now = self.ctx.clock.now()
        events: list[Any] = [SessionsRestored(
            originator_id=stream, originator_version=len(recorded) + 1, timestamp=now, sessions=sessions,
            archive_sha256=archive.sha256, archive_file=os.path.abspath(path), positions=archived.positions,
            actor=actor, cause=cause)]
        for sid in sessions:
            own = archived_session_stream(sid)
            events.append(SessionRestored(originator_id=own, originator_version=self.ctx.app.stream_version(own) + 1,
                                          timestamp=now, session_id=sid, archive_sha256=archive.sha256,
                                          archive_file=os.path.abspath(path), actor=actor, cause=cause))
        rows = [(e.position, e.originator_id, e.originator_version, e.topic, e.stored) for e in archive.events]
        try:
            position = self.ctx.save(*events, restore_rows=rows)
        except IntegrityError as e:
            raise ConflictError(f"{path} could not be restored: the log already holds events of its streams"
                                f" (restored meanwhile?): {e}") from None
        _step(progress, 2)
        self._forget(sessions)
        self.views.refresh()
        _step(progress, 3)
        return ArchiveRestoreReport(path=path, sha256=archive.sha256, sessions=sessions, events=len(rows),
                                    position=position)

    def _forget(self, session_ids: list[str]) -> None:
        for sid in session_ids:
            self.ctx.cache.forget(session_stream(sid))
            self.ctx.transcripts.forget(sid)


def _listing(row: dict[str, Any]) -> dict[str, Any]:
    """A sessions row as SessionArchived carries it (the read model's columns; origin as JSON text)."""
    out = {k: v for k, v in row.items() if k not in ("routed", "archive_file", "archive_sha256", "archived_at")}
    if isinstance(out.get("origin"), dict):
        out["origin"] = orjson.dumps(out["origin"]).decode()
    return out


def _step(progress: Progress | None, done: int) -> None:
    if progress is not None:
        progress(done, STEPS)
