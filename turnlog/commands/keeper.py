"""The lease keeper: one background thread per Turnlog that keeps its running turns' leases and
its gateway boot's heartbeat alive, so that a live holder never loses a lease however long its
turn takes (agent thinking, tools, sending), while a dead one loses it within the TTL.

A kept lease is renewed once a third of `lease_ttl_s` has passed since its last renewal (a turn's
own writes renew it too, so a busy turn costs no extra events); the heartbeat likewise with
`heartbeat_ttl_s`. Due times are read from the injected clock, so under a ManualClock nothing is
renewed until the test moves time. A renewal that is refused — the lease was revoked by /stop or
/new, or taken over after a stall — cancels the turn: its CancelToken is set (callbacks run, an
asyncio agent gets CancelledError) and every later write of the turn is refused by the lease's
fencing anyway. The item such a turn was answering is settled by the rule in turn.py
(`Turn.fail`): /stop and /new close it themselves, a takeover leaves it to the next completed
turn on the session, a dead boot's to recovery.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from ..domain import heartbeat as hb_rules
from ..domain.heartbeat import Heartbeat
from ..errors import StaleLease, TurnCancelled
from .context import CommandContext
from .lease import LeaseToken, LeaseCommands

POLL_MAX_S = 0.25
log = logging.getLogger(__name__)


class CancelToken:
    """Set when the running turn lost its lease; the responder may poll it or wait on it."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[str], object]] = []
        self.reason: str | None = None

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise TurnCancelled(f"the turn was cancelled: {self.reason}")

    def on_cancel(self, callback: Callable[[str], object]) -> None:
        """Run `callback(reason)` when cancelled (at once if already cancelled)."""
        with self._lock:
            if not self.cancelled:
                self._callbacks.append(callback)
                return
        callback(self.reason or "")

    def cancel(self, reason: str) -> None:
        with self._lock:
            if self.cancelled:
                return
            self.reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback(reason)
            except Exception:  # noqa: BLE001 - one failing callback must not stop the others
                log.exception("a cancel callback failed")


@dataclass
class RunningTurn:
    """What the responder of the running turn can see: its lease token and its cancel token."""

    token: LeaseToken
    cancel: CancelToken = field(default_factory=CancelToken)


_current: contextvars.ContextVar[RunningTurn | None] = contextvars.ContextVar("turnlog_turn", default=None)


def current_turn() -> RunningTurn | None:
    """The turn the calling responder runs in (None outside a turn run by the engine)."""
    return _current.get()


class Keeper:
    def __init__(self, ctx: CommandContext, turns: LeaseCommands) -> None:
        self.ctx = ctx
        self.turns = turns
        self._kept: dict[tuple[str, int], RunningTurn] = {}
        self._heartbeat: Heartbeat | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._working = threading.Lock()
        self._closed = False
        self._thread: threading.Thread | None = None
        turns.on_release = self.release

    # -- registration -------------------------------------------------------------------------

    def keep(self, token: LeaseToken) -> RunningTurn:
        running = RunningTurn(token)
        with self._lock:
            self._kept[(token.session_id, token.epoch)] = running
        self._ensure_thread()
        return running

    def release(self, token: LeaseToken) -> None:
        """Stop renewing the token's lease; returns once no renewal of it is in progress."""
        with self._lock:
            running = self._kept.pop((token.session_id, token.epoch), None)
        if running is not None:
            with self.turns.write_lock(token):
                pass

    def kept(self) -> list[RunningTurn]:
        with self._lock:
            return list(self._kept.values())

    def start_heartbeat(self, heartbeat: Heartbeat) -> None:
        with self._lock:
            self._heartbeat = heartbeat
        self._ensure_thread()

    def end_heartbeat(self, *, actor: str, cause: str) -> Heartbeat | None:
        """Stop renewing; returns the heartbeat with its pending end, to save with the stop."""
        with self._lock:
            heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.end(at=self.ctx.clock.now(), actor=actor, cause=cause)
        return heartbeat

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    # -- the thread -------------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="turnlog-keeper", daemon=True)
                # It works only while holding this lock, so a rebuild can fork a helper while it
                # holds it still (projections/parallel.py).
                self._thread.fork_guard = self._working  # type: ignore[attr-defined]
                self._thread.start()

    def _poll_s(self) -> float:
        config = self.ctx.config
        return max(min(config.lease_ttl_s / 12, config.heartbeat_ttl_s / 12, POLL_MAX_S), 0.005)

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self._poll_s())
            if self._closed:
                return
            try:
                with self._working:
                    self.tick()
            except Exception:  # noqa: BLE001 - a database hiccup: try again at the next poll
                log.exception("the lease keeper's renewal failed; retrying")

    def tick(self) -> None:
        """Renew whatever is due now (the thread's step; callable directly in tests)."""
        ttl = self.ctx.config.lease_ttl_s
        for running in self.kept():
            token = running.token
            with self.turns.write_lock(token):
                with self._lock:
                    if self._kept.get((token.session_id, token.epoch)) is not running:
                        continue  # released meanwhile
                expires_at = self.turns.kept_expiry(token)
                if expires_at is not None and not hb_rules.due(expires_at, self.ctx.clock.now(), ttl):
                    continue
                try:
                    self.turns.fenced_save(token, cause="keeper")
                except StaleLease as lost:
                    with self._lock:
                        self._kept.pop((token.session_id, token.epoch), None)
                    running.cancel.cancel(str(lost))
        self._beat()

    def _beat(self) -> None:
        with self._lock:
            heartbeat = self._heartbeat
            if heartbeat is None:
                return
            ttl = self.ctx.config.heartbeat_ttl_s
            now = self.ctx.clock.now()
            if not hb_rules.due(heartbeat.expires_at, now, ttl):
                return
            # Only this boot writes its heartbeat stream: no read, and a conflict cannot happen.
            heartbeat.renew(ttl, at=now, actor=heartbeat.boot_id, cause="heartbeat")
            self.ctx.app.save(heartbeat)
        # A rekey made by another process holds here from the next heartbeat on.
        self.ctx.key_settings(fresh=True)


def run_as(running: RunningTurn | None, call: Callable[[], Any]) -> Any:
    """Call `call()` with `running` as the current turn (what current_turn() returns inside)."""
    if running is None:
        return call()
    reset = _current.set(running)
    try:
        return call()
    finally:
        _current.reset(reset)
