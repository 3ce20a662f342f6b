"""A sealed value's plaintext is zstd-compressed before it is sealed when that shrinks it (sealed
bytes are random to the event compressor); a value that would not shrink, like every value
sealed before, keeps the plain form, and both read back, and an erased one reads "[erased]"."""

from __future__ import annotations

import json
import sqlite3

from turnlog.storage.event_compressor import inflate

from chat import alice, collect, reply_with

LONG = "the deploy pipeline rolled back the database migration again; " * 20


def _sealed_contents(db: str) -> list[str]:
    """The sealed `_v_` of each stored MessageAppended's content, in order."""
    conn = sqlite3.connect(db)
    try:
        states = [inflate(bytes(r[0])) for r in conn.execute(
            "SELECT state FROM stored_events WHERE topic='turnlog:MessageAppended' ORDER BY rowid")]
    finally:
        conn.close()
    return [json.loads(s)["content"]["_v_"] for s in states]


def test_long_words_are_sealed_compressed_short_ones_plain_and_both_read_back(make_turnlog, db):
    t = make_turnlog()
    [turn] = t.handle_message(alice("m1"), "hi", reply_with(LONG), collect([]))
    user, reply = _sealed_contents(db)
    assert user[:1] == "s" and user[1:2] != "~"  # "hi" would not shrink: the form sealed values had before
    assert reply[:2] == "s~" and len(reply) < len(LONG) // 4
    assert [m["content"] for m in t.transcript(turn.session_id)] == ["hi", LONG]
    t.close()
    again = make_turnlog()
    assert [m["content"] for m in again.transcript(turn.session_id)] == ["hi", LONG]


def test_an_erased_compressed_value_reads_as_erased(make_turnlog):
    t = make_turnlog()
    [turn] = t.handle_message(alice("m1"), LONG, reply_with(LONG), collect([]))
    t.erase_subject("telegram:42", actor="operator", cause="erase request")
    assert [m["content"] for m in t.transcript(turn.session_id)] == ["[erased]", "[erased]"]
