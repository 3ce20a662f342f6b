"""Group commit: the saves that threads of one process make at the same moment share one transaction.

A thread that saves while another thread's save is being committed queues its save and waits.
When that commit is done, the first queued thread becomes the leader: it takes every save queued
by then (up to GROUP_LIMIT) and writes them in one transaction (one BEGIN..COMMIT, one fsync
under synchronous=FULL), then wakes their threads and hands the lead to the next queued save.
No timer: a group is whatever queued while the previous commit ran, so a lone save (the
sequential path) is committed at once, as before, by the library's own save.

Each save keeps its own optimistic-concurrency checks (a fenced write's lease renewal is one of
its events, so its epoch is still checked), and stays all-or-nothing for its caller: if the group's
transaction fails (one member's conflict fails the whole insert), the group is rolled back and its
saves are written again one by one, each in its own transaction, so a conflict or error fails
only the save it belongs to. Order is kept: members are written in the order they were queued,
and one key's saves are never in flight together (its turns run one at a time).

TURNLOG_GROUP_COMMIT=0 turns it off (every save commits alone): for measuring it.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from typing import Any, Callable, Iterator

from eventsourcing.application import ProcessingEvent
from eventsourcing.persistence import Recording

from ..domain.env_flags import env_flag

from .store import TurnlogApplication

GROUP_LIMIT = 256  # saves per transaction: bounds one commit's latency and its rollback's waste

# What the calling thread gives back while its save waits for a group (the asyncio API's store
# slot: so that more threads reach the store and the group grows), and takes again after.
_WHILE_WAITING: contextvars.ContextVar[tuple[Callable[[], Any], Callable[[], Any]] | None] = \
    contextvars.ContextVar("turnlog_group_wait", default=None)


@contextlib.contextmanager
def giving_back(release: Callable[[], Any], reacquire: Callable[[], Any]) -> Iterator[None]:
    """Within the block (in this thread), a save waiting for its group calls `release` first and
    `reacquire` once woken."""
    reset = _WHILE_WAITING.set((release, reacquire))
    try:
        yield
    finally:
        _WHILE_WAITING.reset(reset)


def grouping() -> bool:
    return env_flag("TURNLOG_GROUP_COMMIT")


class _Member:
    __slots__ = ("items", "ready", "lead", "recordings", "error")

    def __init__(self, items: tuple[Any, ...]) -> None:
        self.items = items
        self.ready: threading.Event | None = None  # made only for a save that has to wait
        self.lead = False  # woken to lead the next group rather than with its save done
        self.recordings: list[Recording] | None = None
        self.error: BaseException | None = None


class GroupCommit:
    def __init__(self, app: TurnlogApplication, *, enabled: bool | None = None) -> None:
        self.app = app
        self.enabled = grouping() if enabled is None else enabled
        self._lock = threading.Lock()
        self._queued = threading.Condition(self._lock)
        self._queue: list[_Member] = []
        self._leading = False
        self.groups = 0  # transactions that wrote more than one save (for tests and benchmarks)
        self.grouped = 0  # saves written in those

    def save(self, items: tuple[Any, ...]) -> list[Recording]:
        """Save `items` (aggregates, events) in one transaction, shared with other threads' saves
        made meanwhile; returns their recordings, or raises what saving them alone would raise."""
        if not self.enabled:
            return self.app.save(*items)
        with self._lock:
            alone = not self._leading and not self._queue
            if alone:
                self._leading = True
            else:
                member = _Member(items)
                member.ready = threading.Event()
                self._queue.append(member)
                self._queued.notify_all()
        if alone:
            try:
                return self.app.save(*items)
            finally:
                self._hand_on()
        assert member.ready is not None
        hand_back = _WHILE_WAITING.get()
        if hand_back is None:
            member.ready.wait()
        else:
            hand_back[0]()
            try:
                member.ready.wait()
            finally:
                hand_back[1]()
        if member.lead:
            self._lead()
        if member.error is not None:
            raise member.error
        assert member.recordings is not None
        return member.recordings

    def wait_queued(self, count: int, timeout: float) -> bool:
        """Wait until `count` saves wait for the commit in progress (tests line a group up with it)."""
        with self._queued:
            return self._queued.wait_for(lambda: len(self._queue) >= count, timeout)

    def _lead(self) -> None:
        """Commit the queued saves as one group, then pass the lead on."""
        with self._lock:
            group, self._queue = self._queue[:GROUP_LIMIT], self._queue[GROUP_LIMIT:]
        try:
            self.commit(group)
        except BaseException as failure:
            for member in group:
                if member.recordings is None and member.error is None:
                    member.error = failure
            raise
        finally:
            self._hand_on()
            for member in group:
                if not member.lead:
                    assert member.ready is not None
                    member.ready.set()
            # The leader's own save is in the group: it returns (or raises) like any member's.

    def _hand_on(self) -> None:
        with self._lock:
            if self._queue:
                successor = self._queue[0]
                successor.lead = True
                assert successor.ready is not None
                successor.ready.set()
            else:
                self._leading = False

    def commit(self, group: list[_Member]) -> None:
        """Write the group in one transaction; if that fails, each member alone."""
        if len(group) == 1:
            self._alone(group[0], None)
            return
        collected = [self.app.collect(*member.items) for member in group]
        try:
            written = self.app.put_group(collected)
        except Exception:  # one member's conflict (or any failure) must fail only that member
            for member, processing in zip(group, collected):
                self._alone(member, processing)
            return
        self.groups += 1
        self.grouped += len(group)
        for member, processing, recordings in zip(group, collected, written):
            member.recordings = recordings
            try:
                self.app.snapshot_saved(processing)
            except Exception as error:  # its events are committed; as the library's save would, it raises
                member.error = error

    def _alone(self, member: _Member, processing: ProcessingEvent | None) -> None:
        try:
            member.recordings = (self.app.save(*member.items) if processing is None
                                 else self.app.put_collected(processing))
        except Exception as error:  # raised in the member's own thread
            member.error = error
