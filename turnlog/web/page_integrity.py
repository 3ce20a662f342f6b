"""Integrity: projection positions against the log's head, and `verify` / `verify --chain` run
on demand in the background with their progress."""

from __future__ import annotations

import functools
from typing import Any, Callable

from .. import InvalidRequest, NotFound, Turnlog
from .html import Markup, table, tag
from .snapshot import Snapshot
from .viewer import Job, Result, Viewer

CHECKS = ("verify", "chain")


def integrity(v: Snapshot, params: dict[str, str]) -> Result:
    jobs = [j.to_dict() for j in v.checks.values()]
    data = {"head": v.t.maintenance.log_head(), "projections_in_file": v.status_at_open,
            "projections_now": [p.to_dict() for p in v.t.maintenance.projection_status()], "checks": jobs}
    body = Markup(
        tag("p", f"log head #{data['head']}")
        + tag("h2", "Read models in the file (as opened)")
        + table(v.status_at_open, ["name", "position", "head", "behind", "rebuild_position"], id="positions")
        + tag("h2", "Checks")
        + tag("p", Markup(tag("button", "run verify", type="button", class_="run-check", **{"data-check": "verify"})
                          + tag("button", "run verify --chain", type="button", class_="run-check",
                                **{"data-check": "chain"})))
        + tag("progress", "", id="check-progress", max=1, value=0, hidden=True)
        + tag("pre", "", id="check-output")
        + table(jobs, ["id", "check", "state", "done", "total", "error"], empty="no check run yet", id="checks"))
    return Result("Integrity", data, body)


def start_check(v: Viewer, check: str) -> tuple[Job, bool]:
    """Start `check` on the current snapshot, which it holds until it ends; or the check of that
    kind already running. True if started."""
    if check not in CHECKS:
        raise InvalidRequest(f"unknown check {check!r} (known: {', '.join(CHECKS)})")
    snap = v.acquire()
    return v.checks.start(check, lambda: _steps(snap.t, check), done=lambda: v.release(snap))


def _steps(t: Turnlog, check: str) -> list[tuple[str, Callable[[], Any]]]:
    if check == "verify":
        return [(p.name, functools.partial(t.maintenance.verify, [p.name])) for p in t.maintenance.projection_status()]
    return [("chain", lambda: {"breaks": [b.to_dict() for b in t.maintenance.verify_chain().breaks]})]


def job(v: Viewer, job_id: str) -> Job:
    found = v.checks.get(job_id)
    if found is None:
        raise NotFound(f"no check {job_id!r}")
    return found
