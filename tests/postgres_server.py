"""A throwaway PostgreSQL server for the tests: initdb into a temporary folder, listening only on
a Unix socket there, stopped at the end. Uses the Debian binaries (scripts/test installs them).

As root, the server runs as the `postgres` user (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import quote


def binaries() -> Path | None:
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(candidate, "initdb").exists():
            return Path(candidate)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def server() -> Iterator[str]:
    """Yields a URL prefix `postgresql://postgres@<socket dir>:<port>/`; add a database name."""
    bin_dir = binaries()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL's initdb was not found: install the postgresql package (scripts/test does)")
    home = Path(tempfile.mkdtemp(prefix="turnlog-pg-"))
    data, sock = home / "data", home
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(home, "postgres")
        os.chmod(home, 0o755)
        as_user = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    run = lambda *args: subprocess.run([*as_user, *args], check=True, capture_output=True, text=True)  # noqa: E731
    run(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(home / "log"), "-w", "-o",
        f"-p {port} -k {sock} -c listen_addresses='' -c fsync=off -c max_connections=50", "start")
    try:
        yield f"postgresql://postgres@{quote(str(sock), safe='')}:{port}/"
    finally:
        subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True)
        time.sleep(0.1)
        shutil.rmtree(home, ignore_errors=True)


def create_database(prefix: str, name: str) -> str:
    import psycopg

    with psycopg.connect(prefix + "postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return prefix + name


class RoundTrips:
    """Counts the waits on a PostgreSQL server (a query sent and its answer read) that psycopg
    makes while installed: its connections run every exchange with the server through
    `Connection.wait`, and an exchange that needs no answer (a commit in autocommit) never waits."""

    def __init__(self) -> None:
        self.count = 0

    def __enter__(self) -> "RoundTrips":
        import psycopg

        self._original = original = psycopg.Connection.wait
        trips = self

        def counted(gen):  # type: ignore[no-untyped-def]
            try:
                waited_for = next(gen)
            except StopIteration as done:
                return done.value
            trips.count += 1
            while True:
                ready = yield waited_for
                try:
                    waited_for = gen.send(ready)
                except StopIteration as done:
                    return done.value

        def wait(conn, gen, *args, **kwargs):  # type: ignore[no-untyped-def]
            return original(conn, counted(gen), *args, **kwargs)

        psycopg.Connection.wait = wait  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        import psycopg

        psycopg.Connection.wait = self._original  # type: ignore[method-assign]
