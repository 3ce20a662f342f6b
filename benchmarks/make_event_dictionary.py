"""How turnlog/commands/event_dictionary.py was made (run once; the result is frozen forever).

The preset dictionary of the event compressor holds the *shape* of turnlog's events: two events
of each topic from a standard-workload database, with message text, names and chat titles
blanked, the most frequent topics last (closest to the data, cheapest to refer to). Changing it
would make every event compressed with it unreadable: a new dictionary needs a new marker byte.

    python benchmarks/make_event_dictionary.py path/to/bench.db > turnlog/commands/event_dictionary.py
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys

BLANKED = ("content", "text", "chat_name", "display_name", "summary")  # and every time (blanked())
LIMIT = 7000  # must stay below the compressor's 8 KiB window


def blanked(state: bytes) -> bytes:
    data = json.loads(state)
    for name in BLANKED:
        if isinstance(data.get(name), str):
            data[name] = ""
    if isinstance(data.get("source"), dict) and "chat_name" in data["source"]:
        data["source"]["chat_name"] = ""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    # times as a neutral moment: the shape of a time, not the day the dictionary was made
    text = re.sub(r'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00"', '"2000-01-01T00:00:00.000000+00:00"', text)
    return re.sub(r'"\d{8}_\d{6}_', '"20000101_000000_', text).encode()  # session ids begin with their day


def main(db: str) -> None:
    conn = sqlite3.connect(db)
    counts = conn.execute("SELECT topic, count(*) FROM stored_events GROUP BY topic ORDER BY 2, 1").fetchall()
    parts = []
    for topic, count in counts:
        # two events a topic, a third and two thirds of the way in: both sides of a role or a state
        for offset in sorted({count // 3, (2 * count) // 3}):
            state = conn.execute("SELECT state FROM stored_events WHERE topic=? ORDER BY rowid LIMIT 1 OFFSET ?",
                                 (topic, offset)).fetchone()[0]
            parts.append(blanked(state))
    dictionary = b"".join(parts)[-LIMIT:]
    print('"""The preset dictionary of turnlog\'s event compressor, version 1 (benchmarks/make_event_dictionary.py).\n\n'
          'Frozen: events compressed with it are read with it forever."""\n')
    print("DICTIONARY_V1 = (")
    for i in range(0, len(dictionary), 96):
        print(f"    {dictionary[i:i + 96]!r}")
    print(")")


if __name__ == "__main__":
    main(sys.argv[1])
