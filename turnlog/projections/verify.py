"""Checking the read models against the log (`verify`) and repairing them (`doctor`).

verify: every projection is rebuilt from the log, up to the position the live one has reached,
into a temporary SQLite file; then each of its tables is compared with the live table whole row
by whole row (SQL EXCEPT both ways), which names every row that was changed, is missing or is
extra. Full-text indexes are not compared page by page (their layout depends on the order of
merges) but checked with FTS5's own integrity check, which compares the index with its rows.

doctor: finds damage a read model can suffer and, unless told not to, rebuilds the damaged ones
from the log. The log (the events table) is only ever read. It reads the read models' table
definitions through sqlite-utils; a rebuild's inserts stay prepared statements, which
benchmarks/bench_sqlite_utils.py measures 2.6 times faster than sqlite-utils' `insert_all`.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from typing import Any

import sqlite_utils

from ..errors import UnreadableEvent
from .runner import ProjectionRunner
from .views_file import connect_views

SAMPLE = 10  # rows named per table and kind of difference


def verify(runner: ProjectionRunner, names: list[str] | None = None) -> dict[str, Any]:
    selected = names if names is not None else list(runner.projections)
    started = time.perf_counter()
    live = runner.positions()
    stops = {name: live.get(name, 0) for name in selected}
    with tempfile.TemporaryDirectory(prefix="turnlog-verify-") as tmp:
        path = os.path.join(tmp, "fresh.db")
        copy = connect_views(path)
        try:
            runner.build_copy(copy, stops)
        except UnreadableEvent as e:
            return _unreadable_report(selected, stops, e, started)
        finally:
            copy.close()
        with runner.lock:
            runner.db.execute("ATTACH DATABASE ? AS fresh", (path,))
            try:
                results = [_verify_one(runner, name, stops[name]) for name in selected]
            finally:
                runner.db.execute("DETACH DATABASE fresh")
    return {"ok": all(r["ok"] for r in results), "projections": results,
            "seconds": round(time.perf_counter() - started, 3)}


def _unreadable_report(selected: list[str], stops: dict[str, int], error: UnreadableEvent,
                       started: float) -> dict[str, Any]:
    """The log holds an event no rebuild can take: nothing is compared, the event is named."""
    problem = f"event at position {error.position} ({error.topic}) cannot be read: {error.problem}"
    results = [{"name": name, "position": stops[name], "ok": False, "tables": [],
                "problems": [problem if name == error.name else
                             f"not compared: the rebuild stopped at the event at position {error.position}"]}
               for name in selected]
    return {"ok": False, "projections": results, "unreadable": {"position": error.position, "topic": error.topic,
                                                                 "problem": error.problem},
            "seconds": round(time.perf_counter() - started, 3)}


def _verify_one(runner: ProjectionRunner, name: str, position: int) -> dict[str, Any]:
    p = runner.projections[name]
    tables = []
    problems = []
    for table in p.tables:
        if _is_virtual(runner.db, "fresh", table):
            continue
        tables.append(_compare(runner.db, table))
    check = getattr(p, "integrity", None) or getattr(getattr(p, "inner", None), "integrity", None)
    if check is not None:
        problems = check(runner.db)
    ok = not problems and all(t["ok"] for t in tables)
    return {"name": name, "position": position, "ok": ok, "tables": tables, "problems": problems}


def _compare(db: sqlite3.Connection, table: str) -> dict[str, Any]:
    fresh_columns = _columns(db, "fresh", table)
    live_columns = _columns(db, "main", table)
    result: dict[str, Any] = {"table": table, "ok": False, "rows": 0, "changed": 0, "missing": 0, "extra": 0,
                              "differences": []}
    if not live_columns:
        result["problem"] = "the live table is missing"
        return result
    if [c for c, _ in live_columns] != [c for c, _ in fresh_columns]:
        result["problem"] = "the live table has other columns than a rebuild gives"
        return result
    key = [c for c, pk in sorted(fresh_columns, key=lambda c: c[1]) if pk] or [c for c, _ in fresh_columns]
    cols = ", ".join(f"[{c}]" for c in key)
    live_only = {tuple(r) for r in db.execute(
        f"SELECT {cols} FROM (SELECT * FROM main.[{table}] EXCEPT SELECT * FROM fresh.[{table}])")}
    fresh_only = {tuple(r) for r in db.execute(
        f"SELECT {cols} FROM (SELECT * FROM fresh.[{table}] EXCEPT SELECT * FROM main.[{table}])")}
    changed, extra, missing = live_only & fresh_only, live_only - fresh_only, fresh_only - live_only
    result["rows"] = db.execute(f"SELECT count(*) FROM main.[{table}]").fetchone()[0]
    result.update(changed=len(changed), missing=len(missing), extra=len(extra), ok=not (live_only or fresh_only))
    for kind, keys in (("changed", changed), ("missing", missing), ("extra", extra)):
        for k in sorted(keys, key=repr)[:SAMPLE]:
            result["differences"].append({"kind": kind, "key": dict(zip(key, k))})
    return result


def _columns(db: sqlite3.Connection, schema: str, table: str) -> list[tuple[str, int]]:
    return [(r[1], r[5]) for r in db.execute(f"PRAGMA {schema}.table_info([{table}])")]


def _is_virtual(db: sqlite3.Connection, schema: str, table: str) -> bool:
    row = db.execute(f"SELECT sql FROM {schema}.sqlite_master WHERE type='table' AND name=?", (table,)).fetchone()
    return bool(row and row[0] and row[0].upper().startswith("CREATE VIRTUAL"))


# -- doctor -------------------------------------------------------------------------------


def doctor(runner: ProjectionRunner, *, repair: bool = True, deep: bool = False) -> dict[str, Any]:
    """`deep` also compares every read model with a rebuild (verify), which finds any damage but
    costs a rebuild's time."""
    findings = _examine(runner, deep)
    to_rebuild = sorted({f["projection"] for f in findings if f["projection"]})
    if repair and to_rebuild:
        runner.run_rebuild(to_rebuild)
        still = {(f["check"], f["projection"]) for f in _examine(runner, deep)}
        for f in findings:
            f["repaired"] = bool(f["projection"]) and (f["check"], f["projection"]) not in still
    ok = all(f["repaired"] for f in findings)
    checked = ["sqlite quick_check", "tables", "unfinished rebuilds", "positions", "full-text indexes"]
    return {"ok": ok, "findings": findings, "repaired": repair and bool(to_rebuild),
            "checked": checked + (["verify"] if deep else [])}


def _examine(runner: ProjectionRunner, deep: bool) -> list[dict[str, Any]]:
    findings: list[dict[str, Any]] = []

    def found(check: str, projection: str | None, problem: str) -> None:
        findings.append({"check": check, "projection": projection, "problem": problem, "repaired": False})

    with runner.lock:
        rows = [r[0] for r in runner.db.execute("PRAGMA quick_check").fetchall()]
        if rows != ["ok"]:
            found("sqlite", None, "; ".join(rows[:5]))
        existing = set(sqlite_utils.Database(runner.db).table_names())
        head = runner.head()
        positions = runner.positions()
        for name, position in sorted(runner.rebuilding().items()):
            found("rebuild", name, f"a rebuild stopped at position {position} of {head}; it resumes from there")
        for name, p in runner.projections.items():
            missing = [t for t in p.tables if t not in existing]
            if missing:
                found("tables", name, f"missing table {', '.join(missing)}")
                continue
            if positions.get(name, 0) > head:
                found("position", name, f"position {positions[name]} is past the log's head {head}")
            check = getattr(p, "integrity", None)
            for problem in check(runner.db) if check is not None else ():
                found("integrity", name, problem)
    if deep:
        damaged = {f["projection"] for f in findings}
        for result in verify(runner)["projections"]:
            if not result["ok"] and result["name"] not in damaged:
                tables = [t["table"] for t in result["tables"] if not t["ok"]]
                found("verify", result["name"], f"differs from a rebuild from the log in {', '.join(tables)}")
    return findings
