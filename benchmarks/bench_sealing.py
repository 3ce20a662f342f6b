"""CPU cost of encryption at rest per stored event: the mapper's encode (to_stored_event) and
decode (to_domain_event) of the events of real turns, sealed and plain, in CPU time (less
sensitive to a shared machine's load than wall time), alternated in rounds.

    .venv/bin/python benchmarks/bench_sealing.py [--turns 200] [--rounds 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from turnlog import Turnlog  # noqa: E402

from chat import alice, collect, echo  # noqa: E402


def events_of(encryption: bool, turns: int, folder: str) -> tuple[Turnlog, list]:
    t = Turnlog(os.path.join(folder, f"{encryption}.db"), encryption=encryption)
    for n in range(turns):
        t.handle_message(alice(f"m{n}"), f"message {n}: " + "words of a turn " * 8, echo, collect([]))
    app = t._app  # noqa: SLF001 - a benchmark of the storage edge itself
    stored = app.recorder.select_notifications(0, 100_000)
    return t, [(app.mapper, n) for n in stored]


def per_event_us(mapper, notes) -> tuple[float, float]:
    decoded = [mapper.to_domain_event(n) for n in notes]
    start = time.process_time()
    for _ in range(5):
        for e in decoded:
            mapper.to_stored_event(e)
    encode = (time.process_time() - start) / (5 * len(decoded)) * 1e6
    start = time.process_time()
    for _ in range(5):
        for n in notes:
            mapper.to_domain_event(n)
    decode = (time.process_time() - start) / (5 * len(notes)) * 1e6
    return encode, decode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        opened = {mode: events_of(mode, args.turns, folder) for mode in (True, False)}
        figures: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for _ in range(args.rounds):
            for mode in (True, False):
                t, pairs = opened[mode]
                figures[mode].append(per_event_us(pairs[0][0], [n for _, n in pairs]))
        for mode in (True, False):
            enc = statistics.median(f[0] for f in figures[mode])
            dec = statistics.median(f[1] for f in figures[mode])
            print(f"{'sealed' if mode else 'plain '}: encode {enc:.1f} µs/event, decode {dec:.1f} µs/event"
                  f" (medians of {args.rounds} rounds, {len(opened[mode][1])} events)")
        for t, _ in opened.values():
            t.close()


if __name__ == "__main__":
    main()
