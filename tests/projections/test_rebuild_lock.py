"""Two rebuilds of one file at once, in two processes: the second is refused with one line while
the first runs, and the first ends like a clean rebuild (no unfinished rebuild left behind)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from harness.cli import ok
from turnlog import SessionSource, Turnlog

# A rebuild that stops at its first progress report, says so on stdout, and goes on when a line
# arrives on stdin: it holds the rebuild (and its fresh tables) for as long as the test wants.
HELD_REBUILD = textwrap.dedent("""
    import sys
    from turnlog import Turnlog

    said = []

    def progress(done, todo):
        if not said:
            said.append(1)
            print("rebuilding", flush=True)
            sys.stdin.readline()

    with Turnlog(sys.argv[1]) as t:
        t.maintenance.rebuild(progress=progress, workers=1)
    print("done", flush=True)
""")


def seeded(path: str) -> str:
    with Turnlog(path) as t:
        for n in range(30):
            source = SessionSource(platform="telegram", chat_type="dm", chat_id=str(n), user_id=str(n))
            t.get_or_create_session(source)
        t.maintenance.catch_up()
    return path


@dataclass
class HeldRebuild:
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""


@contextmanager
def rebuild_held(db: str) -> Iterator[HeldRebuild]:
    """Another process holds a rebuild of `db` for the block, then finishes it (its outcome in the
    yielded record once the block ends)."""
    first = subprocess.Popen([sys.executable, "-c", HELD_REBUILD, db], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    held = HeldRebuild()
    try:
        assert first.stdout is not None and first.stdin is not None
        assert first.stdout.readline() == "rebuilding\n"  # it holds the rebuild now
        yield held
        first.stdin.write("go\n")
        first.stdin.flush()
        held.stdout, held.stderr = first.communicate(timeout=120)
        held.returncode = first.returncode
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


def turnlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "turnlog", *args], capture_output=True, text=True, timeout=120)


def test_a_second_rebuild_while_one_runs_is_refused_and_the_first_finishes_clean(tmp_path):
    db = seeded(str(tmp_path / "turnlog.db"))
    with rebuild_held(db) as first:
        second = turnlog("--db", db, "rebuild", "search")
        assert second.returncode == 1, second.stderr
        assert second.stderr.count("\n") == 1 and "another rebuild is running" in second.stderr
        assert "Traceback" not in second.stderr
    assert first.returncode == 0, first.stderr
    assert first.stdout == "done\n"
    status = json.loads(ok("--db", db, "doctor", "--dry-run", "--json").output)
    assert status["ok"], status
    with Turnlog(db, read_only=True) as t:
        assert all(p.rebuild_position is None for p in t.maintenance.projection_status())
    assert ok("--db", db, "rebuild", "search").exit_code == 0  # once the first is done
