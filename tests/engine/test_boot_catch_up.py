"""A boot's recovery catches up only the read models the engine's commands read: a new node on a
big log does not wait for its full-text index and timeline before it serves; the facade's reads
still catch everything up first."""

from __future__ import annotations

from tests.chat import alice, collect


def behind(t, name: str) -> int:
    return next(p.behind for p in t.maintenance.projection_status() if p.name == name)


def position(t, name: str) -> int:
    return next(p.position for p in t.maintenance.projection_status() if p.name == name)


def test_a_boot_leaves_the_search_index_and_timeline_for_later(make_turnlog, clock):
    dead = make_turnlog(owner="gateway-a")
    dead.start_gateway("main")  # never stopped: the next boot recovers it
    clock.advance(3600)  # its heartbeat long expired
    t = make_turnlog(owner="gateway-b")
    sent: list[str] = []
    for n in range(3):
        t.handle_message(alice(f"m{n}"), f"hello {n}", lambda history, item: "hi", collect(sent))
    assert behind(t, "search") > 0 and behind(t, "sessions") > 0  # the turns do not catch up
    head = t.maintenance.projection_status()[0].head

    t.start_gateway("main")  # recovering gateway-a's boot reads sessions, queue, leases, ledger
    assert all(position(t, name) >= head for name in ("routes", "sessions", "queue", "leases", "ledger")), \
        t.maintenance.projection_status()
    assert position(t, "search") < head and position(t, "timeline") < head

    assert len(t.sessions()) == 1  # a read catches everything up first
    assert t.maintenance.projections_behind() == 0
