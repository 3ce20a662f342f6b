"""sqlite-utils on the read side, measured against turnlog's own statements.

A rebuild fills read-model tables with prepared `executemany` inserts; sqlite-utils' `insert_all`
builds the same rows from dicts. This times both on rows shaped like the transcript table's
(session, seq, role, content, time), and `Database.table_names()` / `virtual_table_using`
(what `doctor` asks of the read models) against the plain queries.

    .venv/bin/python benchmarks/bench_sqlite_utils.py --rows 200000 --json
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time

import sqlite_utils

SCHEMA = "CREATE TABLE messages (session TEXT, seq INTEGER, role TEXT, content TEXT, at TEXT, PRIMARY KEY (session, seq))"


def rows(n: int) -> list[tuple[str, int, str, str, str]]:
    return [(f"s{i // 50}", i % 50, "user" if i % 2 else "assistant", f"message {i} " * 8,
             "2026-03-01T10:00:00.000000+00:00") for i in range(n)]


def fresh() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.execute(SCHEMA)
    return db


def with_executemany(data: list[tuple]) -> float:
    db = fresh()
    start = time.perf_counter()
    db.execute("BEGIN")
    db.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?)", data)
    db.execute("COMMIT")
    return time.perf_counter() - start


def with_insert_all(data: list[tuple]) -> float:
    db = fresh()
    names = ("session", "seq", "role", "content", "at")
    start = time.perf_counter()
    sqlite_utils.Database(db)["messages"].insert_all((dict(zip(names, r)) for r in data), batch_size=500)
    return time.perf_counter() - start


def introspection(repeat: int) -> tuple[float, float]:
    db = fresh()
    db.execute("CREATE VIRTUAL TABLE search USING fts5(content)")
    start = time.perf_counter()
    for _ in range(repeat):
        wrapped = sqlite_utils.Database(db)
        wrapped.table_names()
        wrapped["search"].virtual_table_using
    utils = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(repeat):
        db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        db.execute("SELECT sql FROM sqlite_master WHERE name='search'").fetchone()
    plain = time.perf_counter() - start
    return utils, plain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    data = rows(args.rows)
    plain = min(with_executemany(data) for _ in range(args.runs))
    utils = min(with_insert_all(data) for _ in range(args.runs))
    look_utils, look_plain = introspection(1000)
    result = {"rows": args.rows, "executemany_s": round(plain, 3), "insert_all_s": round(utils, 3),
              "insert_all_over_executemany": round(utils / plain, 2),
              "doctor_lookup_us": {"sqlite_utils": round(look_utils * 1000, 1), "plain": round(look_plain * 1000, 1)}}
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
