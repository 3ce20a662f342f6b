"""The cross-process turn lease and the transcript writes fenced by it (docs/behaviour.md §5, §10).

A token is handed to the holder; every write under it is saved with a renewal of the lease (a
turn's first message with the acquisition itself, which reserves its seq), so a write under a
lease that was taken over, revoked (/new, /stop) or moved (compression) is refused by optimistic
concurrency and leaves no event.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterable

from eventsourcing.persistence import IntegrityError

from ..clock import event_and_lease_time, lease_time
from ..domain.base import stream_id
from ..domain.lease import LeaseHeld, TurnLease
from ..domain.transcript import MessageAppended, read_transcript, transcript_id, validate_message
from ..errors import InvalidRequest, LeaseTimeout, StaleLease
from .context import CommandContext

POLL_START_S = 0.002
POLL_MAX_S = 0.05


def lease_id(session_id: str) -> uuid.UUID:
    return stream_id("lease", session_id)


@dataclass(frozen=True)
class LeaseToken:
    session_id: str
    epoch: int
    owner: str
    owner_key: str
    generation: int
    turn_id: str
    expires_at: datetime


@dataclass(frozen=True)
class MessageRecord:
    session_id: str
    seq: int
    role: str
    position: int


class LeaseCommands:
    def __init__(self, ctx: CommandContext, owner: str) -> None:
        self.ctx = ctx
        self.owner = owner
        self._held: dict[tuple[str, int], TurnLease] = {}
        self._lock = threading.Lock()
        # One writer at a time per held lease: the turn's own writes and the keeper's renewals
        # (keeper.py) share the cached lease object.
        self._write_locks: dict[tuple[str, int], threading.RLock] = {}
        self.on_release: Callable[[LeaseToken], None] | None = None  # the keeper stops renewing

    # -- the lease ------------------------------------------------------------------------

    def acquire(self, session_id: str, owner_key: str, *, generation: int = 0, timeout: float | None = None,
                turn_id: str | None = None, actor: str | None = None, cause: str = "turn",
                before_save: Callable[[TurnLease, LeaseToken], Iterable[Any]] | None = None,
                reserve_seq: bool = False, stop: threading.Event | None = None) -> LeaseToken:
        """Wait up to `timeout` seconds (default: the configured lease timeout) for the lease.

        `before_save(lease, token)` may add events of other aggregates or streams to the same
        transaction (returning them), so that what starts the turn is atomic with owning it;
        with `reserve_seq` the acquisition reserves `lease.last_seq` for its first message.
        `stop`: once set, the wait is given up (LeaseTimeout) at the next poll.
        """
        if not session_id or not isinstance(session_id, str):
            raise InvalidRequest("acquire needs a session_id")
        timeout = self.ctx.config.lease_timeout_s if timeout is None else timeout
        deadline = time.monotonic() + max(timeout, 0.0)
        turn_id = turn_id or uuid.uuid4().hex
        actor = actor or self.owner
        recorder = self.ctx.recorder
        began = time.perf_counter()
        with recorder.span("lease", **{"turnlog.waited": True}):
            token = self._acquire(session_id, owner_key, generation, timeout, deadline, turn_id, actor, cause,
                                  before_save, reserve_seq, stop)
        recorder.lease_wait(time.perf_counter() - began)
        return token

    def _acquire(self, session_id: str, owner_key: str, generation: int, timeout: float, deadline: float,
                 turn_id: str, actor: str, cause: str,
                 before_save: Callable[[TurnLease, LeaseToken], Iterable[Any]] | None, reserve_seq: bool,
                 stop: threading.Event | None) -> LeaseToken:
        pause = POLL_START_S
        fresh = False
        while True:
            try:
                lease, token = self.acquiring(session_id, owner_key, generation=generation, turn_id=turn_id,
                                              actor=actor, cause=cause, fresh=fresh, reserve_seq=reserve_seq)
                extra = list(before_save(lease, token)) if before_save is not None else []
                self.ctx.save(lease, *extra)
                self.adopt(token, lease)
                return token
            except IntegrityError:
                continue
            except LeaseHeld as held:
                fresh = True  # the holder may be another process: look at the log, not the cache
                if time.monotonic() >= deadline:
                    raise LeaseTimeout(
                        f"turn lease of session {session_id} not obtained within {timeout:g}s: {held}"
                    ) from None
                wait = min(pause, max(deadline - time.monotonic(), 0.0))
                if stop is None:
                    time.sleep(wait)
                elif stop.wait(wait):
                    raise LeaseTimeout(f"the wait for the turn lease of session {session_id} was given up: {held}"
                                       ) from None
                pause = min(pause * 2, POLL_MAX_S)

    def acquiring(self, session_id: str, owner_key: str, *, generation: int = 0, turn_id: str | None = None,
                  actor: str | None = None, cause: str = "turn", fresh: bool = False, reserve_seq: bool = False,
                  new_session: bool = False) -> tuple[TurnLease, LeaseToken]:
        """The lease with its acquisition pending, and the token it will give once saved (raises
        LeaseHeld). The save is the claim: another taker's newer events make it conflict. A caller
        that saves it itself registers the token with `adopt` after the save.
        `new_session`: the session is being created in the same transaction, so its lease cannot
        exist yet and is not looked up (were it there, the save would conflict)."""
        actor = actor or self.owner
        lease: TurnLease | None = None if new_session else self.ctx.get(lease_id(session_id), fresh)
        now, lease_now = event_and_lease_time(self.ctx.clock)
        if lease is None:
            lease = TurnLease.new(TurnLease.Created, id=lease_id(session_id), at=now, actor=actor, cause=cause,
                                    session_id=session_id)
        turn_id = turn_id or uuid.uuid4().hex
        epoch = lease.acquire(owner=self.owner, owner_key=owner_key, generation=generation, turn_id=turn_id,
                              ttl_s=self.ctx.config.lease_ttl_s, at=now, actor=actor, cause=cause,
                              lease_now=lease_now, reserve_seq=reserve_seq)
        assert lease.expires_at is not None  # just acquired
        return lease, LeaseToken(session_id, epoch, self.owner, owner_key, generation, turn_id, lease.expires_at)

    def held(self, token: LeaseToken) -> TurnLease:
        """The token's lease as held (cached, else read from the log); StaleLease once it moved on."""
        with self._lock:
            lease = self._held.get((token.session_id, token.epoch))
        if lease is None:
            lease = self.ctx.get(lease_id(token.session_id), fresh=True)
        if lease is None or lease.epoch != token.epoch or lease.owner != token.owner:
            raise StaleLease(f"lease epoch {token.epoch} of session {token.session_id} is no longer held")
        return lease

    def adopt(self, token: LeaseToken, lease: TurnLease) -> None:
        """The token's acquisition is saved: this process holds the lease."""
        with self._lock:
            self._held[(token.session_id, token.epoch)] = lease
        if lease.previous_end == "taken_over":
            self.ctx.recorder.takeover(token.session_id)

    def forget(self, token: LeaseToken) -> None:
        """Stop keeping the token: its turn ended, or its lease moved on (rotation)."""
        self._stop_keeping(token)
        with self._lock:
            self._held.pop((token.session_id, token.epoch), None)
            self._write_locks.pop((token.session_id, token.epoch), None)

    def _stop_keeping(self, token: LeaseToken) -> None:
        if self.on_release is not None:
            self.on_release(token)

    def write_lock(self, token: LeaseToken) -> threading.RLock:
        with self._lock:
            return self._write_locks.setdefault((token.session_id, token.epoch), threading.RLock())

    def kept_expiry(self, token: LeaseToken) -> datetime | None:
        """When the token's lease expires as this process last wrote it (None: not cached)."""
        with self._lock:
            lease = self._held.get((token.session_id, token.epoch))
        return lease.expires_at if lease is not None and lease.epoch == token.epoch else None

    def fenced_save(self, token: LeaseToken, *items: Any, last_seq: int | None = None,
                    actor: str | None = None, cause: str = "turn") -> int:
        """Save `items` together with a renewal of the token's lease; refused if the lease moved on."""
        with self.write_lock(token):
            return self._fenced_save(token, items, last_seq, actor, cause)

    def _fenced_save(self, token: LeaseToken, items: tuple[Any, ...], last_seq: int | None, actor: str | None,
                     cause: str) -> int:
        lease = self.held(token)
        now, lease_now = event_and_lease_time(self.ctx.clock)
        lease.renew(epoch=token.epoch, ttl_s=self.ctx.config.lease_ttl_s,
                    last_seq=lease.last_seq if last_seq is None else last_seq, at=now, actor=actor or self.owner,
                    cause=cause, lease_now=lease_now)
        try:
            return self.ctx.save(lease, *items)
        except IntegrityError:
            self.forget(token)
            self.ctx.recorder.stale_write(token.session_id)
            raise StaleLease(
                f"lease epoch {token.epoch} of session {token.session_id} was taken over, revoked or moved;"
                " the write was refused"
            ) from None

    def release_event(self, token: LeaseToken, outcome: str, *, cause: str = "turn") -> TurnLease | None:
        """The holder's lease with a pending release, to commit with other events; None if not held."""
        self._stop_keeping(token)
        lease = self.ctx.get(lease_id(token.session_id), fresh=False)
        if lease is None or not lease.release(epoch=token.epoch, outcome=outcome, at=self.ctx.clock.now(),
                                              actor=self.owner, cause=cause):
            return None
        return lease

    def renew(self, token: LeaseToken) -> None:
        self.fenced_save(token, cause="renew")

    def release(self, token: LeaseToken, outcome: str = "completed", *,
                also: Callable[[], Iterable[Any]] | None = None, actor: str | None = None,
                cause: str = "turn") -> bool:
        """Idempotent; True only for the call that actually released the holder's lease."""
        self._stop_keeping(token)
        for _ in range(3):
            lease = self._cached_or_loaded(token)
            if lease is None:
                return False
            if not lease.release(epoch=token.epoch, outcome=outcome, at=self.ctx.clock.now(),
                                 actor=actor or self.owner, cause=cause):
                self.forget(token)
                return False
            try:
                self.ctx.save(lease, *(also() if also is not None else ()))
                self.forget(token)
                return True
            except IntegrityError:
                self.forget(token)
        return False

    def _cached_or_loaded(self, token: LeaseToken) -> TurnLease | None:
        with self._lock:
            lease = self._held.get((token.session_id, token.epoch))
        return lease if lease is not None else self.ctx.get(lease_id(token.session_id), fresh=True)

    def revoke(self, session_id: str, reason: str, *, actor: str, cause: str) -> TurnLease | None:
        """Take the lease from whoever holds it (/new, /stop); returns the lease with the pending event."""
        lease: TurnLease | None = self.ctx.get(lease_id(session_id))
        if lease is None or not lease.revoke(reason=reason, at=self.ctx.clock.now(), actor=actor, cause=cause):
            return None
        return lease

    def holder(self, session_id: str) -> dict[str, Any] | None:
        lease: TurnLease | None = self.ctx.get(lease_id(session_id), fresh=True)
        if lease is None or lease.owner is None:
            return None
        return {"session_id": session_id, "owner": lease.owner, "owner_key": lease.owner_key, "epoch": lease.epoch,
                "turn_id": lease.turn_id, "expires_at": lease.expires_at,
                "expired": not lease.held_at(lease_time(self.ctx.clock))}

    # -- transcript writes ----------------------------------------------------------------

    def message_event(self, token: LeaseToken, seq: int, role: str, content: str, *, tool_calls: Any = None,
                      tool_call_id: str | None = None, name: str | None = None, token_count: int | None = None,
                      finish_reason: str | None = None, platform_message_id: str | None = None,
                      actor: str | None = None, cause: str = "turn") -> MessageAppended:
        try:
            validate_message(role, content, tool_calls, token_count)
        except ValueError as e:
            raise InvalidRequest(str(e)) from None
        return MessageAppended(
            originator_id=transcript_id(token.session_id), originator_version=seq, timestamp=self.ctx.clock.now(),
            session_id=token.session_id, role=role, content=content, tool_calls=tool_calls,
            tool_call_id=tool_call_id, name=name, token_count=token_count, finish_reason=finish_reason,
            platform_message_id=platform_message_id, epoch=token.epoch, turn_id=token.turn_id,
            actor=actor or self.owner, cause=cause,
        )

    def next_seq(self, token: LeaseToken) -> int:
        return self.held(token).last_seq + 1

    def append(self, token: LeaseToken, role: str, content: str, *, also: Iterable[Any] = (),
               cause: str = "turn", actor: str | None = None, **fields: Any) -> MessageRecord:
        seq = self.next_seq(token)
        event = self.message_event(token, seq, role, content, actor=actor, cause=cause, **fields)
        position = self.fenced_save(token, event, *also, last_seq=seq, actor=actor, cause=cause)
        return MessageRecord(token.session_id, seq, role, position)

    def transcript(self, session_id: str, *, after: int | None = None, upto: int | None = None,
                   limit: int | None = None, newest_first: bool = False) -> list[MessageAppended]:
        return read_transcript(self.ctx.app.events.get, session_id, after=after, upto=upto,
                               newest_first=newest_first, limit=limit)
