"""Real child processes for crash tests: run a snippet as a gateway process, SIGKILL it on cue.

The snippet runs with `kit` in scope (a `Kit`): `kit.turnlog()` opens the test's database (with a
ManualClock at the time the parent chose, so several boots are as far apart as the test says),
`kit.ready(**data)` tells the parent that the point to be killed at is reached, `kit.hang()`
blocks until the kill, and `kit.kill_after_save(t, predicate)` makes the process SIGKILL itself
right after committing a save that `predicate` picks (a crash between two commits);
`kill_before_save` just before it, `kill_in_transaction` inside its transaction before the commit;
`kill_in_group` at the k-th transaction that group commit shares between several saves (with
`line_up_groups` making such transactions certain rather than chance overlaps),
`kill_at_write` inside the n-th write transaction of any kind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
CHILD_TIMEOUT_S = 60.0
LINE_UP_S = 5.0  # a bound on a lone save's wait for others to queue behind it; reached only when none come


def child_env() -> dict[str, str]:
    paths = [str(REPO), str(TESTS), os.environ.get("PYTHONPATH")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


class Kit:
    """What a child snippet gets: the database, a work folder, a clock, and the cues. On a
    PostgreSQL log, `views` names the child's own read-model file (each gateway keeps its own)."""

    def __init__(self, db: str, work: str, at: str | None, views: str | None = None) -> None:
        self.db = db
        self.work = Path(work)
        self.at = at
        self.views = views

    def clock(self) -> Any:
        from turnlog import ManualClock, SystemClock
        return ManualClock(self.at) if self.at else SystemClock()

    def turnlog(self, **options: Any) -> Any:
        from turnlog import Turnlog
        options.setdefault("clock", self.clock())
        if self.views:
            options.setdefault("views", f"{self.views}-{os.getpid()}.db")
        return Turnlog(self.db, **options)

    def ready(self, name: str = "ready", **data: Any) -> None:
        tmp = self.work / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"pid": os.getpid(), **data}))
        os.replace(tmp, self.work / f"{name}.json")

    def hang(self) -> None:
        while True:
            time.sleep(3600)

    def kill_self(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def kill_after_save(self, t: Any, predicate: Callable[[tuple[Any, ...]], bool]) -> None:
        """SIGKILL this process right after `t` commits a save whose items `predicate` picks."""
        original = t._app.save

        def save(*items: Any, **kwargs: Any) -> Any:
            result = original(*items, **kwargs)
            if predicate(items):
                self.kill_self()
            return result
        t._app.save = save

    def kill_before_save(self, t: Any, predicate: Callable[[tuple[Any, ...]], bool]) -> None:
        """SIGKILL this process as `t` is about to save items that `predicate` picks (decided, not saved)."""
        original = t._app.save

        def save(*items: Any, **kwargs: Any) -> Any:
            if predicate(items):
                self.kill_self()
            return original(*items, **kwargs)
        t._app.save = save

    def kill_in_transaction(self, t: Any, topic: str) -> None:
        """SIGKILL this process inside the SQLite transaction that inserts an event of `topic`, after
        its rows are written and before the commit."""
        recorder = t._app.recorder
        original = recorder._insert_events

        def insert(c: Any, stored_events: Any, **kwargs: Any) -> Any:
            positions = original(c, stored_events, **kwargs)
            if any(s.topic == topic for s in stored_events):
                self.kill_self()
            return positions
        recorder._insert_events = insert

    def kill_at_write(self, t: Any, n: int) -> None:
        """SIGKILL this process inside its n-th write transaction (lone or shared by a group), after
        its rows are written and before the commit."""
        recorder = t._app.recorder
        original = recorder._insert_events
        writes = [0]
        counting = threading.Lock()

        def insert(c: Any, stored_events: Any, **kwargs: Any) -> Any:
            positions = original(c, stored_events, **kwargs)
            with counting:
                writes[0] += 1
                last = writes[0] == n
            if last:
                self.kill_self()
            return positions
        recorder._insert_events = insert

    def kill_in_group(self, t: Any, k: int, point: str) -> None:
        """SIGKILL this process at the k-th group commit (one transaction for several threads'
        saves): `point` "in_transaction" once its rows are written, before the commit;
        "after_commit" once it is committed, before any member's thread is woken (so none has
        sent or acknowledged what its save recorded)."""
        if point not in ("in_transaction", "after_commit"):
            raise ValueError(f"unknown kill point {point!r}")
        app, recorder = t._app, t._app.recorder
        groups = [0]
        killing = threading.local()
        put_group, insert = app.put_group, recorder._insert_events

        def grouped(group: Any) -> Any:
            groups[0] += 1
            killing.now = groups[0] == k and point == "in_transaction"
            result = put_group(group)
            if groups[0] == k:
                self.kill_self()
            return result

        def inserting(c: Any, stored_events: Any, **kwargs: Any) -> Any:
            positions = insert(c, stored_events, **kwargs)
            if getattr(killing, "now", False):
                self.kill_self()
            return positions
        app.put_group = grouped
        recorder._insert_events = inserting

    def line_up_groups(self, t: Any, behind: int = 2) -> None:
        """From now on, a save that group commit is about to write alone first waits until `behind`
        other saves are queued behind it (or LINE_UP_S), so the transaction after it is a group:
        with several keys in flight, each lone commit is followed by a group commit for certain."""
        commits = t._ctx.commits
        group_save, app_save = commits.save, t._app.save
        within = threading.local()

        def save(items: Any) -> Any:
            within.depth = getattr(within, "depth", 0) + 1
            try:
                return group_save(items)
            finally:
                within.depth -= 1

        def save_alone(*items: Any, **kwargs: Any) -> Any:
            if getattr(within, "depth", 0):  # group commit's own lone write, not another caller's
                commits.wait_queued(behind, LINE_UP_S)
            return app_save(*items, **kwargs)
        commits.save = save
        t._app.save = save_alone


_BOOT = """
import sys
from harness.procs import Kit
kit = Kit(sys.argv[1], sys.argv[2], sys.argv[3] or None, sys.argv[4] or None)
"""


@dataclass
class Killed:
    pid: int
    data: dict[str, Any]  # what the child passed to kit.ready()
    returncode: int


def start(db: str | os.PathLike[str], code: str, *, at: datetime | str | None = None,
          work: str | os.PathLike[str] | None = None, views: str | None = None) -> subprocess.Popen:
    """A child running `code` on `db`; `views` (a path prefix) for a log in PostgreSQL."""
    work = Path(work) if work is not None else Path(db).parent
    stamp = at.isoformat() if isinstance(at, datetime) else (at or "")
    script = _BOOT + textwrap.dedent(code)
    return subprocess.Popen([sys.executable, "-c", script, str(db), str(work), stamp, views or ""], env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = CHILD_TIMEOUT_S) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"child exited with {proc.returncode} before {path.name}:\n{err.decode()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"child did not reach {path.name} within {timeout:g}s")
        time.sleep(0.005)
    return json.loads(path.read_text())


def crash(db: str | os.PathLike[str], code: str, *, at: datetime | str | None = None, cue: str = "ready",
          work: str | os.PathLike[str] | None = None, views: str | None = None) -> Killed:
    """Run `code` in a child; SIGKILL it as soon as it calls kit.ready(cue) (or when it kills itself)."""
    work = Path(work) if work is not None else Path(db).parent
    marker = work / f"{cue}.json"
    if marker.exists():
        marker.unlink()
    proc = start(db, code, at=at, work=work, views=views)
    data: dict[str, Any] = {}
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while proc.poll() is None and not marker.exists():
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("child neither reached its cue nor died")
        time.sleep(0.005)
    if marker.exists():
        data = json.loads(marker.read_text())
        marker.unlink()
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    _, err = proc.communicate()
    if proc.returncode != -signal.SIGKILL:
        raise AssertionError(f"child was expected to die of SIGKILL, exited {proc.returncode}:\n{err.decode()}")
    return Killed(proc.pid, data, proc.returncode)


def run(db: str | os.PathLike[str], code: str, *, at: datetime | str | None = None,
        work: str | os.PathLike[str] | None = None, views: str | None = None) -> str:
    """Run `code` in a child to completion; returns its stdout."""
    proc = start(db, code, at=at, work=work, views=views)
    try:
        out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("child did not finish") from None
    if proc.returncode != 0:
        raise AssertionError(f"child exited with {proc.returncode}:\n{err.decode()}")
    return out.decode()
