"""An import shared by several processes: each takes a range of session ids (about as many
messages each) and saves its own batches; the parent then records the home.

Most of an import's time is encoding events and the library's per-event work, which one Python
process does on one core; the writes themselves are short transactions that SQLite (or
PostgreSQL) serialises. Each share is an ordinary import of part of the home, so a share that
is killed resumes like any import, and no session is imported twice: a session is in exactly one
share, and the log refuses a second creation of it anyway.

The shares run as `python -m turnlog.hermes.parallel` children (a request on stdin, the report
on stdout), so an embedding program's own main module is never re-imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, fields
from datetime import datetime
from typing import Any

from ..clock import ManualClock, hermes_session_id
from ..commands.context import CommandContext
from ..commands.store import StoreLocation, open_application
from ..config import EngineConfig
from ..errors import TurnlogError
from .formats import read_home
from .importer import HermesImporter, ImportReport, Progress

SUMMED = ("sessions_imported", "sessions_already_imported", "messages_imported", "inactive_rows_kept",
          "routes_imported", "suspended", "resume_pending")


def import_in_parallel(location: StoreLocation, importer: HermesImporter, hermes_home: str, *,
                       profile: str | None, dry_run: bool, progress: Progress | None, batch_messages: int,
                       workers: int) -> ImportReport:
    home = read_home(hermes_home, profile)
    try:
        shares = home.shares(workers)
    finally:
        home.close()
    known = importer.known()
    now = importer.ctx.clock.now()  # one time for every share: the events say when the import happened
    children = []
    for share in shares:
        request = {"location": asdict(location), "home": hermes_home, "profile": profile, "share": share,
                   "now": now.isoformat(), "known": known, "dry_run": dry_run, "batch_messages": batch_messages}
        child = subprocess.Popen([sys.executable, "-m", "turnlog.hermes.parallel"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert child.stdin is not None
        child.stdin.write(json.dumps(request).encode())  # the child reads it all at once, then works
        child.stdin.close()
        child.stdin = None
        children.append(child)
    report: ImportReport | None = None
    done = 0
    failures = []
    for child in children:
        out, err = child.communicate()
        if child.returncode != 0:
            failures.append(err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {child.returncode}"])
            continue
        part = ImportReport(**json.loads(out))
        report = part if report is None else _merged(report, part)
        done += part.messages_imported
        if progress is not None:
            progress(done, part.messages_found)
    if failures or report is None:
        raise TurnlogError(f"{len(failures)} of {len(children)} import processes failed: {failures[0][0]}"
                           " (run the import again: it resumes)")
    if not dry_run:
        home = read_home(hermes_home, profile)
        try:
            importer._record_home(home, report)
        finally:
            home.close()
    return report


def _merged(a: ImportReport, b: ImportReport) -> ImportReport:
    merged = ImportReport(**{f.name: getattr(a, f.name) for f in fields(ImportReport)})
    for name in SUMMED:
        setattr(merged, name, getattr(a, name) + getattr(b, name))
    merged.skipped = [*a.skipped, *(s for s in b.skipped if s not in a.skipped)]
    merged.routes_rekeyed = [*a.routes_rekeyed, *b.routes_rekeyed]
    return merged


def _share(request: dict[str, Any]) -> dict[str, Any]:
    app = open_application(StoreLocation(**request["location"]))
    try:
        clock = ManualClock(datetime.fromisoformat(request["now"]))
        ctx = CommandContext(app, clock, hermes_session_id, EngineConfig())
        known = request["known"]
        report = HermesImporter(ctx, lambda: known).run(
            request["home"], profile=request["profile"], dry_run=request["dry_run"],
            batch_messages=request["batch_messages"], share=tuple(request["share"]), record_home=False)
    finally:
        app.close()
    data = report.to_dict()
    data.pop("nothing_to_do")
    return data


if __name__ == "__main__":
    print(json.dumps(_share(json.load(sys.stdin))))
