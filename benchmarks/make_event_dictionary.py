"""How turnlog's event-compressor dictionaries were made (each is frozen forever once shipped).

Version 2 (`turnlog/commands/event_dictionary_v2.zdict`, zstd, tag byte 2) is trained with
`zstandard.train_dictionary` on a corpus that is not just the benchmark's own data:

* the standard workload at three seeds and shapes that are not the measured run's (seed 1,
  S=200 T=25 is held out), with message text blanked: the workload's text comes from a 32-word
  list that a dictionary would simply memorise, which says nothing about real conversations;
* `turnlog demo` (~30 kinds: heartbeats, gateway boots, revoked leases, resume marks ...) and
  every state the tests of the event kinds write (slash commands, resets, Hermes imports, failed
  deliveries, rich replies, recovery, queue, batching ...), captured by a pytest plugin around
  the compressor, text kept (it is varied);
* the snapshots among both.

Times, session ids, random hex ids, boot ids and pids are renumbered in order of appearance, and
the tests run in a fixed folder, so the corpus, and hence the dictionary, does not depend on the
day, the process or uuid4 draws: the same code trains the same bytes (checked: two runs, one
sha256, which the compressor pins).

    python benchmarks/make_event_dictionary.py train [--out turnlog/commands/event_dictionary_v2.zdict]
    python benchmarks/make_event_dictionary.py eval DB [--dict PATH]   # bytes and µs an event, held-out DB

A new dictionary needs a new tag byte and a new file: events written with an old one are read with it.

Version 1 (`turnlog/commands/event_dictionary.py`, raw deflate, tag byte 1) was two events a topic
of one standard-workload database, blanked, the most frequent topics last; kept here as `v1`.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import re
import sqlite3
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DICT_SIZE = 16384
LEVEL = 3
# (seed, sessions, turns): not the held-out standard run (seed 1, S=200 T=25)
WORKLOADS = ((2, 60, 20), (3, 30, 40), (4, 150, 6))
# Tests whose events do not depend on thread or process timing (the corpus must not vary);
# heartbeats, which those others write, come from the demo.
TEST_FILES = (
    "test_reset_commands.py", "test_rich_replies.py", "test_hermes_import.py", "test_turn_failures.py",
    "test_reply_obligation.py", "test_slack_migration.py", "test_queue.py", "test_batching.py",
    "test_recovery.py", "test_rotation.py", "test_sweep.py", "test_silence.py", "test_export_fork.py",
    "test_ingest.py", "test_plugin_platforms.py", "test_sender_signature.py",
)
BLANKED = ("content", "text", "chat_name", "display_name", "summary")

_TIME = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?\+00:00")
_SESSION_ID = re.compile(rb"\d{8}_\d{6}_[0-9a-f]{8}")
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HEX = re.compile(rb"(?<![0-9a-zA-Z_])[0-9a-f]{32}(?![0-9a-zA-Z])")
_OWNER = re.compile(rb"(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]+:\d+:[0-9a-f]{8}\b")  # host:pid:random, a boot's id
_PID = re.compile(rb'"pid":\d+')
_EPOCH = re.compile(rb"(?<![\d.])1\d{9}\.\d+")  # wall-clock seconds (an inbox's seen ids)


class Renumber:
    """Replaces times, session ids and random ids by deterministic ones, in order of appearance
    (one original always gets the same replacement, so repeats within the corpus stay repeats)."""

    def __init__(self) -> None:
        self.seen: dict[bytes, bytes] = {}
        self.clock = datetime(2026, 1, 1, tzinfo=timezone.utc)
        self.n = itertools.count()

    def _hex(self, length: int) -> str:
        return hashlib.sha256(str(next(self.n)).encode()).hexdigest()[:length]

    def _time(self, m: re.Match[bytes]) -> bytes:
        self.clock += timedelta(milliseconds=1377, microseconds=next(self.n) % 997)
        return self.clock.isoformat(timespec="microseconds").encode()

    def _id(self, m: re.Match[bytes], make) -> bytes:  # type: ignore[no-untyped-def]
        original = m.group(0)
        if original not in self.seen:
            self.seen[original] = make(original)
        return self.seen[original]

    def __call__(self, state: bytes) -> bytes:
        state = _SESSION_ID.sub(lambda m: self._id(m, lambda o: self.clock.strftime("%Y%m%d_%H%M%S_").encode()
                                                   + self._hex(8).encode()), state)
        state = _UUID.sub(lambda m: self._id(m, lambda o: (lambda h: f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")(
            self._hex(32)).encode()), state)
        state = _HEX.sub(lambda m: self._id(m, lambda o: self._hex(32).encode()), state)
        state = _OWNER.sub(lambda m: self._id(m, lambda o: f"gw-host:{1000 + next(self.n)}:{self._hex(8)}".encode()), state)
        state = _PID.sub(lambda m: self._id(m, lambda o: f'"pid":{1000 + next(self.n)}'.encode()), state)
        state = _EPOCH.sub(lambda m: self._id(m, lambda o: f"{1767225600 + next(self.n) * 1.377:.6f}".encode()), state)
        return _TIME.sub(self._time, state)


def blanked(state: bytes) -> bytes:
    """The state's shape with its free text emptied (the workload's text is a tiny vocabulary)."""
    data = json.loads(state)
    for name in BLANKED:
        if isinstance(data.get(name), str):
            data[name] = ""
    for nested in ("source", "origin"):
        if isinstance(data.get(nested), dict) and isinstance(data[nested].get("chat_name"), str):
            data[nested]["chat_name"] = ""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def stored_states(db: str) -> list[bytes]:
    """Every stored event's and snapshot's state of a database, as JSON."""
    from turnlog.storage.event_compressor import inflate

    conn = sqlite3.connect(db)
    try:
        states = [inflate(row[0]) for row in conn.execute("SELECT state FROM stored_events ORDER BY rowid")]
        # snapshots in the order of their streams' first events (stream ids are random)
        states += [inflate(row[0]) for row in conn.execute(
            "SELECT s.state FROM stored_snapshots s ORDER BY (SELECT min(e.rowid) FROM stored_events e"
            " WHERE e.originator_id = s.originator_id), s.originator_version")]
    finally:
        conn.close()
    return states


def workload_samples() -> list[bytes]:
    from turnlog.bench import run_bench
    from turnlog.demo import run_demo

    samples: list[bytes] = []
    with tempfile.TemporaryDirectory() as home:
        db = os.path.join(home, "demo.db")
        run_demo(db, lambda *a, **k: None, lambda rows, columns: None)
        samples += stored_states(db)
    for seed, sessions, turns in WORKLOADS:
        with tempfile.TemporaryDirectory() as home:
            run_bench(sessions, turns, seed, workdir=home)
            samples += [blanked(s) for s in stored_states(os.path.join(home, "bench.db"))]
    return samples


class _Capture:
    """A pytest plugin: every state the tests hand to turnlog's compressor."""

    def __init__(self) -> None:
        self.states: list[bytes] = []

    def pytest_configure(self, config) -> None:  # type: ignore[no-untyped-def]
        from turnlog.storage.event_compressor import EventCompressor

        original = EventCompressor.compress
        states = self.states

        def compress(self, data: bytes) -> bytes:  # type: ignore[no-untyped-def]
            states.append(bytes(data))
            return original(self, data)

        EventCompressor.compress = compress  # type: ignore[method-assign]


def test_samples() -> list[bytes]:
    import pytest

    capture = _Capture()
    files = [str(path) for name in TEST_FILES for path in sorted((ROOT / "tests").rglob(name))]
    # a fixed base folder: Hermes imports record their home's path in their events
    basetemp = os.path.join(tempfile.gettempdir(), "turnlog-dictionary-corpus")
    code = pytest.main(["-q", "-p", "no:cacheprovider", "-x", f"--basetemp={basetemp}", *files], plugins=[capture])
    if code != 0:
        raise SystemExit(f"the tests failed ({code}): the corpus would be incomplete")
    return capture.states


def corpus() -> list[bytes]:
    renumber = Renumber()
    return [renumber(s) for s in workload_samples() + test_samples()]


def train(samples: list[bytes], size: int = DICT_SIZE) -> bytes:
    import zstandard

    # Fixed parameters (no search) and one thread: the same corpus trains the same bytes.
    d = zstandard.train_dictionary(size, samples, k=1024, d=8, level=LEVEL, threads=1)
    return d.as_bytes()


def evaluate(db: str, dictionary: bytes | None) -> None:
    import zstandard
    from turnlog.storage import event_compressor as ec

    states = stored_states(db)
    if dictionary is None:
        pack, unpack = ec.compact, ec.inflate
    else:
        d = zstandard.ZstdCompressionDict(dictionary)
        c = zstandard.ZstdCompressor(dict_data=d, compression_params=ec.V2_PARAMETERS)
        u = zstandard.ZstdDecompressor(dict_data=d, format=zstandard.FORMAT_ZSTD1_MAGICLESS)
        pack, unpack = (lambda s: ec.V2 + c.compress(s)), (lambda s: u.decompress(s[1:]))
    for name, f, g in (("deflate v1", ec.deflate, ec.inflate), ("zstd v2", pack, unpack)):
        t = time.process_time()
        packed = [f(s) for s in states]
        t1 = time.process_time()
        back = [g(p) for p in packed]
        t2 = time.process_time()
        assert back == states
        n = len(states)
        print(f"{name}: {sum(map(len, packed)) / n:.1f} bytes/state (raw {sum(map(len, states)) / n:.1f}),"
              f" compress {(t1 - t) / n * 1e6:.2f} µs, decompress {(t2 - t1) / n * 1e6:.2f} µs, {n} states")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("--out", default=str(ROOT / "turnlog" / "commands" / "event_dictionary_v2.zdict"))
    t.add_argument("--size", type=int, default=DICT_SIZE)
    t.add_argument("--corpus", help="keep the corpus here (length-prefixed records)")
    e = sub.add_parser("eval")
    e.add_argument("db")
    e.add_argument("--dict", help="a dictionary file to try (default: the shipped one)")
    args = parser.parse_args()
    if args.command == "train":
        samples = corpus()
        if args.corpus:
            with open(args.corpus, "wb") as f:
                for s in samples:
                    f.write(len(s).to_bytes(4, "little") + s)
        dictionary = train(samples, args.size)
        Path(args.out).write_bytes(dictionary)
        print(f"{len(samples)} samples, {sum(map(len, samples))} bytes -> {args.out}: {len(dictionary)} bytes,"
              f" sha256 {hashlib.sha256(dictionary).hexdigest()}", file=sys.stderr)
    else:
        evaluate(args.db, Path(args.dict).read_bytes() if args.dict else None)


if __name__ == "__main__":
    main()
