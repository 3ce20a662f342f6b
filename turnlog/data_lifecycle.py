"""The life of one store's data: encryption at rest and erase, backup, retention and archive, and
copying the whole log to another store. Turnlog's methods of the same names (api.py, where their
contracts are written) call these."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Callable

from .clock import Clock
from .commands.archive import ArchiveCandidate, ArchiveCommands, ArchiveReport, ArchiveRestoreReport
from .commands.context import CommandContext
from .commands.erasure import EraseCommands
from .config import EngineConfig
from .domain.retention import Retention, parse_duration
from .domain.sealing import parse_subject, subject_of
from .domain.session import session_stream
from .errors import ChainBroken, InvalidRequest, ReadOnlyDatabase
from .maintenance import Maintenance
from .projections.routing_views import SessionRow
from .projections.runner import ProjectionRunner
from .storage import backend as storage_backend
from .storage import backup as backups, dbfile, log_copy, reclaim
from .storage import encryption as encryption_setup
from .storage.backup import BackupReport
from .storage.keys import MasterKey
from .storage.log_copy import CopyReport

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class EncryptionReport:
    """A database's encryption at rest: the master key's `fingerprint`, where the key came from
    (`key_source`: callable, env, file; `key_file` its path), `since` the first log position
    written sealed, and after a rotation how many data keys were `rewrapped` and the
    `previous_fingerprint`."""
    fingerprint: str
    key_source: str
    key_file: str | None
    since: int
    rewrapped: int = 0
    previous_fingerprint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class EraseReport:
    """An erase (or its `dry_run`): the subject's keyed hash (never its id), how many data `keys`
    were destroyed, the `sessions` suspended, the SubjectErased event's `position`, and
    `plaintext_before`: the log positions written before the database was encrypted, which
    erase cannot reach (0 for a database encrypted from birth)."""
    subject_hash: str
    keys: int
    sessions: list[str]
    dry_run: bool
    plaintext_before: int
    position: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class DataLifecycle:
    """One open store's encryption, erase, backup, archive and copy. `sessions()` lists the
    sessions (caught up); `open_copy(location, views, master_key)` opens another store as a
    Turnlog (a `with` block), to check and rebuild a copy."""

    def __init__(self, *, app: Any, backend: Any, ctx: CommandContext, clock: Clock, config: EngineConfig,
                 master_key: MasterKey, encryption: Any, read_only: bool, erasure: EraseCommands,
                 archives: ArchiveCommands, maintenance: Maintenance, projections: ProjectionRunner,
                 sessions: Callable[[], list[SessionRow]], open_copy: Callable[[str, str | None, Any], Any]) -> None:
        self._app = app
        self._backend = backend
        self._ctx = ctx
        self._clock = clock
        self._config = config
        self._master_key = master_key
        self._read_only = read_only
        self._erasure = erasure
        self._archives = archives
        self._maintenance = maintenance
        self._projections = projections
        self._sessions = sessions
        self._open_copy = open_copy
        self.encryption = encryption
        if encryption is not None:
            encryption.sealer.session_subject = self.session_subject

    # -- encryption at rest and erase -------------------------------------------------------

    @property
    def key_fingerprint(self) -> str | None:
        return self.encryption.fingerprint if self.encryption is not None else None

    def encrypt(self) -> EncryptionReport:
        self._refuse_read_only("encrypt")
        self.encryption = encryption_setup.start(self._app, self._backend, self._master_key)
        self.encryption.sealer.session_subject = self.session_subject
        return self._encryption_report(0)

    def rotate_master_key(self, new_key: bytes | None) -> EncryptionReport:
        self._refuse_read_only("rotate the master key")
        enc = self._require_encryption("rotate its keys")
        old, _, count = encryption_setup.rotate(enc, new_key,
                                                database=encryption_setup.database_file_of(self._backend))
        self._master_key = new_key if enc.source == "callable" else self._master_key
        return self._encryption_report(count, previous=old)

    def erase_subject(self, subject: str, *, actor: str, cause: str, dry_run: bool,
                      progress: Progress | None) -> EraseReport:
        try:
            subject = parse_subject(subject)
        except ValueError as e:
            raise InvalidRequest(str(e)) from None
        if not dry_run:
            self._refuse_read_only("erase a subject")
        enc = self._require_encryption("erase a subject (it destroys the subject's data key)")
        sessions = [s.session_id for s in self._sessions()
                    if subject_of(s.origin) == subject and s.ended_at is None and not s.suspended]
        keys = enc.keys.live_keys(subject)
        report = EraseReport(subject_hash=enc.keys.subject_hash(subject), keys=len(keys), sessions=sessions,
                             dry_run=dry_run, plaintext_before=enc.keys.marker.since - 1)
        if dry_run:
            return report
        suspended = self._erasure.suspend(sessions, actor=actor, cause=cause)
        # The keys go before the record: a process that reads SubjectErased refills its read
        # models from the log (projections/runner.py), and must find them gone by then.
        enc.keys.destroy(subject, at=self._clock.now().isoformat())
        self._ctx.forget_erased()
        position = self._erasure.record(report.subject_hash, keys=len(keys), sessions=suspended, actor=actor,
                                        cause=cause)
        encryption_setup.purge_snapshots(self._app)
        self._maintenance.rebuild(progress=progress)
        self._projections.scrub()
        return replace(report, sessions=suspended, position=position)

    def erased_keys(self) -> int | None:
        """How many data keys are erased so far (any process's erases); None when not encrypted."""
        return self.encryption.keys.erased() if self.encryption is not None else None

    def forget_keys(self) -> None:
        """Forget the data keys this process holds in memory (an erase elsewhere may have destroyed some)."""
        if self.encryption is not None:
            self.encryption.sealer.forget()

    def session_subject(self, session_id: str) -> str | None:
        """The subject of a session, from its first event (its origin): for sealing its later
        fields in a process that did not see it made."""
        first = list(self._app.events.get(session_stream(session_id), limit=1))
        return subject_of(getattr(first[0], "origin", None)) if first else None

    def _require_encryption(self, what: str) -> Any:
        if self.encryption is None:
            raise InvalidRequest(f"{self._backend.display} is not encrypted: cannot {what} (run `turnlog encrypt`)")
        return self.encryption

    def _refuse_read_only(self, what: str) -> None:
        if self._read_only:
            raise ReadOnlyDatabase(f"this turnlog database is open read-only: cannot {what}")

    def _encryption_report(self, rewrapped: int, previous: str | None = None) -> EncryptionReport:
        enc = self._require_encryption("report on it")
        return EncryptionReport(fingerprint=enc.fingerprint, key_source=enc.source, key_file=enc.key_path,
                                since=enc.keys.marker.since, rewrapped=rewrapped, previous_fingerprint=previous)

    # -- backup, retention and archive ------------------------------------------------------

    def backup(self, out: str | os.PathLike[str], *, progress: Progress | None) -> BackupReport:
        # An encrypted log's read models hold its words in clear: its backups are of the log alone.
        leave_out = self._projections.read_model_tables() if self.encryption is not None else ()
        report = backups.take(self._backend.backup_file(), os.fspath(out), taken_at=self._clock.now().isoformat(),
                              progress=progress, leave_out=leave_out)
        return replace(report, key_fingerprint=self.key_fingerprint)

    def archivable(self, older_than: str | timedelta | None, idle_for: str | timedelta | None
                   ) -> list[ArchiveCandidate]:
        self._maintenance.catch_up()  # the timeline too: it files each stream under its session
        return self._archives.candidates(self._retention(older_than, idle_for))

    def archive(self, out: str | os.PathLike[str], *, older_than: str | timedelta | None,
                idle_for: str | timedelta | None, dry_run: bool, actor: str, cause: str,
                progress: Progress | None) -> ArchiveReport:
        policy = self._retention(older_than, idle_for)
        self._archives.require_sqlite()
        self._maintenance.catch_up()
        path = self._backend.backup_file()
        before = reclaim.file_bytes(path)
        report = self._archives.archive(os.fspath(out), policy, db_identity=dbfile.describe(path), actor=actor,
                                        cause=cause, dry_run=dry_run, progress=progress)
        if dry_run or report.sha256 is None:
            return report
        after = reclaim.reclaim(path).bytes_after
        return replace(report, db_bytes_before=before, db_bytes_after=after)

    def restore_archive(self, path: str | os.PathLike[str], *, actor: str, cause: str,
                        progress: Progress | None) -> ArchiveRestoreReport:
        return self._archives.restore(os.fspath(path), actor=actor, cause=cause, progress=progress)

    def _retention(self, older_than: str | timedelta | None, idle_for: str | timedelta | None) -> Retention:
        configured = self._config.retention
        if older_than is None and idle_for is None:
            return configured
        return replace(configured, older_than=_duration(older_than, "older_than"),
                       idle_for=_duration(idle_for, "idle_for"))

    # -- copying the log to another store ---------------------------------------------------

    def copy_to(self, location: str | os.PathLike[str], *, views: str | None, batch: int | None,
                progress: Progress | None) -> CopyReport:
        if batch is not None and (not isinstance(batch, int) or isinstance(batch, bool) or batch < 1):
            raise InvalidRequest(f"batch must be a positive whole number, not {batch!r}")
        started = time.perf_counter()
        if views is None and storage_backend.needs_views(location):
            raise InvalidRequest("a PostgreSQL target needs a read-model file of its own: views=PATH (--to-views PATH)")
        target = storage_backend.create(location, views)
        if target.same_store(self._backend):
            raise InvalidRequest(f"the copy's target is the source itself ({target.display})")
        stop = self._app.recorder.max_notification_id() or 0
        app = target.prepare(read_only=False, create_missing=True).open_application()
        try:
            resumed_from, copied = log_copy.copy_events(self._app, app, stop=stop, batch=batch or log_copy.BATCH,
                                                        progress=progress)
            if self.encryption is not None:  # after the events: a target that is another log was refused
                encryption_setup.copy_keys(self.encryption, app, target)
            events = log_copy.compare(self._app, app, stop=stop)
        finally:
            app.close()
        master = self.encryption.keys.master if self.encryption is not None else None
        with self._open_copy(os.fspath(location), views, master) as there:
            chain = there.maintenance.verify_chain()
            if chain.breaks:
                raise ChainBroken(f"the copy's hash chain does not verify at position {chain.breaks[0].position}"
                                  " (run `turnlog verify --chain` on it)")
            rebuilt = there.maintenance.rebuild()
        return CopyReport(source=self._backend.display, target=target.display, copied=copied,
                          resumed_from=resumed_from, events=events, head=stop, chain_ok=True,
                          read_models=rebuilt["projections"], seconds=round(time.perf_counter() - started, 3))


def _duration(value: str | timedelta | None, name: str) -> timedelta | None:
    if value is None or isinstance(value, timedelta):
        return value
    try:
        return parse_duration(value)
    except ValueError as e:
        raise InvalidRequest(f"{name}: {e}") from None
