"""The route events a fixed history stores, byte for byte: a new key's route registered already
bound to its first session (one event), a DM's route taken over from its account-less key, a
key whose older session had ended, and the routes a rekey registers. Clock and session ids are
injected, encryption is off (its nonces are random), so the bytes are the same on every run: a
change of how the events are made must leave them so.

An import's events name the Hermes home by its absolute path, which differs between machines:
those are pinned as the compressor's input with that path replaced by `<home>`."""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import replace

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.storage.event_compressor import EventCompressor

from chat import echo
from harness.hermes_home import fixture_home

DM = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", user_name="alice")
OTHER_DM = SessionSource(platform="telegram", chat_type="dm", chat_id="43", user_id="43", user_name="carol")
GROUP = SessionSource(platform="discord", chat_type="group", chat_id="G1", user_id="7", user_name="bob")


def _history(db: str) -> None:
    clock = ManualClock("2026-01-01T00:00:00+00:00")
    with Turnlog(db, clock=clock, session_ids=SequentialIds(), owner="gw", encryption=False) as t:
        t.handle_message(replace(DM, message_id="m1"), "hello", echo, lambda text: None)  # first_message
        clock.advance(60)
        t.handle_message(replace(OTHER_DM, message_id="m2"), "hi", echo, lambda text: None)
        t.command(OTHER_DM, "/new")  # its session ends
        clock.advance(60)
        # The same DMs now naming their bot account: the first takes the account-less key's
        # session over, the second's older session had ended (a new one, on a new route).
        t.handle_message(replace(DM, account_id="bot1", message_id="m3"), "again", echo, lambda text: None)
        t.handle_message(replace(OTHER_DM, account_id="bot1", message_id="m4"), "again", echo, lambda text: None)
        clock.advance(60)
        t.handle_message(replace(GROUP, message_id="m5"), "group", echo, lambda text: None)
        t.handle_message(replace(GROUP, user_id="8", user_name="dan", message_id="m6"), "me too", echo,
                         lambda text: None)
        clock.advance(60)
        t.rekey(group_sessions_per_user=not t.key_settings().group_sessions_per_user, actor="test", cause="test")


def _route_events(db: str) -> list[tuple[str, int, bytes]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT topic, originator_version, state FROM stored_events"
                            " WHERE topic LIKE 'turnlog:Route%' ORDER BY rowid").fetchall()
    finally:
        conn.close()


def test_the_route_events_of_a_fixed_history_are_stored_as_before(tmp_path):
    db = str(tmp_path / "t.db")
    _history(db)
    events = _route_events(db)
    assert [(topic, version) for topic, version, _ in events] == EXPECTED_EVENTS
    digest = hashlib.sha256(b"".join(state for _, _, state in events)).hexdigest()
    assert digest == EXPECTED_DIGEST


def test_the_route_events_of_a_hermes_import_are_stored_as_before(tmp_path):
    db = str(tmp_path / "t.db")
    home = fixture_home().resolve()
    with Turnlog(db, clock=ManualClock("2026-01-01T00:00:00+00:00"), session_ids=SequentialIds(), owner="gw",
                 encryption=False) as t:
        t.import_hermes(home)
    events = _route_events(db)
    assert {topic for topic, _, _ in events} == {"turnlog:RouteRegistered"}  # each registered bound
    inflate = EventCompressor().decompress
    states = [inflate(state) for _, _, state in events]
    assert all(str(home).encode() in state for state in states)
    digest = hashlib.sha256(b"".join(state.replace(str(home).encode(), b"<home>") for state in states)).hexdigest()
    assert (len(events), digest) == EXPECTED_IMPORT


# The stored bytes of these histories' route events when they were pinned (from the log the
# code of that day wrote): a change of them is a change of the stored format.
EXPECTED_EVENTS = [("turnlog:RouteRegistered", 1), ("turnlog:RouteRegistered", 1), ("turnlog:RouteDetached", 2),
                   ("turnlog:RouteDetached", 2), ("turnlog:RouteRegistered", 1), ("turnlog:RouteRegistered", 1),
                   ("turnlog:RouteRegistered", 1), ("turnlog:RouteRegistered", 1), ("turnlog:RouteRegistered", 1)]
EXPECTED_DIGEST = "74040740594ddc77f61d8ae6e8167ca113f91dc5c7e23b9100d06f47f93c504a"
EXPECTED_IMPORT = (10, "3c515b79ce189dc23cd00c509ba378fc65c23460968bac7d3559ff5d38c0acab")
