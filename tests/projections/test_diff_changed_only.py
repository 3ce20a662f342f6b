"""A diff reads only what changed between its two moments (issue 15: page loads under 200 ms on a
large log): the aggregates it rebuilds are the streams with an event between them, never every
delivery, session and lease of each touched session; the answer stays the one of comparing the
two whole states (checked against `at` on both sides).
"""

from __future__ import annotations

import pytest

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog

from chat import echo


def chat(n: int, message_id: str) -> SessionSource:
    return SessionSource(platform="telegram", chat_type="dm", chat_id=str(n), user_id=str(n), message_id=message_id)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    clock = ManualClock("2026-03-01T10:00:00+00:00")
    t = Turnlog(tmp_path_factory.mktemp("diff") / "gateway.db", clock=clock, session_ids=SequentialIds(), owner="gw")
    for turn in range(6):  # three chats, six turns each: many deliveries and lease events per session
        for n in range(3):
            clock.advance(1)
            t.handle_message(chat(n, f"m{n}-{turn}"), f"hello {turn}", echo, lambda text: None)
    a = t._views.head()
    t.handle_message(chat(0, "last"), "one more", echo, lambda text: None)  # one turn on one chat
    b = t._views.head()
    return t, a, b


def loaded_streams(t: Turnlog, fn):
    """The aggregates (ids) rebuilt from the log while fn runs, by spying on the repository."""
    loads: list[str] = []
    real = t._app.repository.get

    def spy(aggregate_id, *args, **kwargs):
        loads.append(str(aggregate_id))
        return real(aggregate_id, *args, **kwargs)

    t._app.repository.get = spy
    try:
        return fn(), loads
    finally:
        del t._app.repository.get


def test_a_diff_rebuilds_only_streams_with_an_event_between_its_moments(gateway):
    t, a, b = gateway
    log = t._views.runner.log
    moved = {log.stream_of(row) for row in log.scan(a, b)}
    result, loads = loaded_streams(t, lambda: t.diff(f"#{a}", f"#{b}"))
    assert loads, "the changed session's aggregates are read"
    assert set(loads) <= moved, sorted(set(loads) - moved)
    assert len(result["sessions"]) == 1


def test_the_diff_agrees_with_the_whole_states_on_both_sides(gateway):
    t, a, b = gateway
    (sid,) = t.diff(f"#{a}", f"#{b}")["sessions"]
    change = t.diff(f"#{a}", f"#{b}")["sessions"][sid]
    before, after = t.at(f"#{a}"), t.at(f"#{b}")
    assert change["messages_added"] == len(after.transcript(sid)) - len(before.transcript(sid)) == 2
    ledger_a = {d["seq"]: d["state"] for d in before.ledger(session=sid)}
    ledger_b = {d["seq"]: d["state"] for d in after.ledger(session=sid)}
    assert change["deliveries"] == {seq: {"from": ledger_a.get(seq), "to": state}
                                    for seq, state in ledger_b.items() if ledger_a.get(seq) != state}
    assert len(ledger_b) > len(change["deliveries"]) >= 1  # older deliveries exist, unchanged, not listed
