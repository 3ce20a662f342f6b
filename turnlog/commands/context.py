"""What every command handler needs: the application, the clock, ids and settings."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, TypeVar
from uuid import UUID

from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError

from ..clock import Clock, SessionIdFactory
from ..config import EngineConfig
from ..domain.base import TurnlogAggregate, stream_id
from ..domain.key_settings import KEY_SETTINGS_ID, KeySettings, KeySettingsChanged, first_change
from ..domain.session import Session, change_reason, session_stream
from ..errors import ConflictError, ReadOnlyDatabase
from ..storage.aggregates import AggregateCache
from ..storage.erased_keys import KeyErased
from ..storage.group_commit import GroupCommit
from ..storage.group_commit import giving_back as giving_back  # for the asyncio API, which may not import storage
from ..storage.store import TurnlogApplication
from ..storage.transcripts import TranscriptCache
from .recorder import Recorder

T = TypeVar("T")
MAX_CONFLICT_RETRIES = 50
log = logging.getLogger(__name__)

# Told (session_id, reason) after a save ended or altered a session (domain/session.py change_reason).
SessionListener = Callable[[str, str], object]


def session_aggregate_id(session_id: str) -> UUID:
    return session_stream(session_id)


@dataclass
class CommandContext:
    app: TurnlogApplication
    clock: Clock
    new_session_id: SessionIdFactory
    config: EngineConfig
    cache: AggregateCache = field(init=False)
    transcripts: TranscriptCache = field(init=False)  # the agent's history topped up, not re-read
    commits: GroupCommit = field(init=False)  # concurrent saves of this process share transactions
    known_key_settings: KeySettings | None = field(default=None, init=False)  # as last read (key_settings)
    read_only: bool = False  # a read-only open (api.Turnlog): every save is refused before it is tried
    session_listeners: list[SessionListener] = field(default_factory=list)
    recorder: Recorder = field(default_factory=lambda: Recorder(""))  # what this process measures
    forget_keys: Callable[[], object] = lambda: None  # the data keys this process holds (api.Turnlog)
    # How many data keys the log holds erased, None for an unencrypted log (api.Turnlog): notice_erasures.
    erased_keys: Callable[[], int | None] = lambda: None
    erasures_seen: int | None = field(default=None, init=False)
    erasures_looked_at: datetime | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.cache = AggregateCache(self.app)
        self.transcripts = TranscriptCache(self.app.events.get)
        self.commits = GroupCommit(self.app)

    def forget_erased(self) -> None:
        """Another process erased a subject whose key this one still held (storage/erased_keys.py):
        forget every key, aggregate and transcript this process holds, so that what it seals next is
        sealed under the subject's new key and what it reads shows the erasure. The erasures it
        counts are those forgotten here, so notice_erasures does not forget them again; the count
        is read first, so an erase that lands meanwhile is noticed at the next look."""
        erased = self.erased_keys()
        self.forget_keys()
        self.cache.clear()
        self.transcripts.clear()
        self.erasures_seen = erased

    def notice_erasures(self) -> None:
        """Forget what this process holds (forget_erased) when a subject was erased since the last
        look, by any process; looks at most every `config.erasure_check_s`. The first look only
        counts: what was cached before it is what the fence of storage/erased_keys.py guards."""
        now = self.clock.now()
        last = self.erasures_looked_at
        if last is not None and (now - last).total_seconds() < self.config.erasure_check_s:
            return
        self.erasures_looked_at = now
        erased = self.erased_keys()
        if erased is not None and self.erasures_seen is not None and erased != self.erasures_seen:
            self.forget_erased()
        else:
            self.erasures_seen = erased

    def get(self, aggregate_id: UUID, fresh: bool = True) -> Any | None:
        """fresh=False only where a save of this aggregate follows (see AggregateCache)."""
        return self.cache.get(aggregate_id, fresh)

    def session(self, session_id: str, fresh: bool = True) -> Session | None:
        return self.get(session_aggregate_id(session_id), fresh)

    def recorded_key_settings(self) -> KeySettingsChanged | None:
        """The log's newest KeySettingsChanged, None before the first rekey (one query)."""
        return first_change(self.app.events.get(KEY_SETTINGS_ID, desc=True, limit=1))

    def key_settings(self, *, fresh: bool = False) -> KeySettings:
        """The key settings in force: the log's when it records some, else the config's. As this
        process last read them, so that routing a message costs no read; `fresh`: read the log now.
        A Turnlog reads them when opened, when it rekeys, and at each heartbeat of its gateway."""
        if not fresh and self.known_key_settings is not None:
            return self.known_key_settings
        recorded = self.recorded_key_settings()
        settings = KeySettings.from_dict(recorded.new) if recorded is not None else self.config.key_settings()
        self.known_key_settings = settings
        return settings

    def save(self, *items: Any, **recorder_options: Any) -> int:
        """Save in one transaction (shared with other threads' saves made at the same moment:
        group_commit.py); returns the log position of the last event written. `recorder_options`
        go to the recorder's insert, in a transaction of its own (an archive's `remove_rows`, a
        restore's `restore_rows`: storage/recorder.py)."""
        if self.read_only:
            raise ReadOnlyDatabase("this turnlog database is open read-only: the change was not recorded")
        try:
            if recorder_options:
                recordings = self.app.save(*items, **recorder_options)
            else:
                recordings = self.commits.save(items)
        except IntegrityError as e:
            if isinstance(e, KeyErased):
                self.forget_erased()
            for item in items:
                if isinstance(item, Aggregate):
                    self.cache.forget(item.id)
            raise
        for item in items:
            if isinstance(item, TurnlogAggregate):
                if item.settled:
                    # Two of these a turn (its delivery, its message id's first sighting) would
                    # push the keys' routes, sessions, inboxes and leases out of the cache; a
                    # rare later read of one finds it in the log.
                    self.cache.forget(item.id)
                else:
                    self.cache.put(item.clone())
        if self.session_listeners:
            self.tell_session_changes(items, [r.domain_event for r in recordings])
        return recordings[-1].notification.id if recordings else 0

    def tell_session_changes(self, items: tuple[Any, ...], events: list[Any]) -> None:
        """Tell the listeners of each session the saved events ended or altered, once the save is done."""
        sessions = {item.id: item.session_id for item in items if isinstance(item, Session)}
        changed: dict[str, str] = {}
        for event in events:
            reason = change_reason(event)
            session_id = getattr(event, "session_id", None) or sessions.get(event.originator_id)
            if reason is not None and session_id is not None:
                changed.setdefault(session_id, reason)
        for session_id, reason in changed.items():
            for listener in list(self.session_listeners):
                try:
                    listener(session_id, reason)
                except Exception:  # the change is saved; a listener's failure must not undo the command's answer
                    log.exception("a session listener failed on %s (%s)", session_id, reason)

    def retrying(self, attempt: Callable[[], T], what: str) -> T:
        """Run a decide-and-save step again from fresh state when another writer got there first."""
        for _ in range(MAX_CONFLICT_RETRIES):
            try:
                return attempt()
            except IntegrityError:
                continue
        raise ConflictError(f"{what}: lost {MAX_CONFLICT_RETRIES} concurrent-update races in a row")
