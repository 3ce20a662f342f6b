"""What the engine promises on every backend, shown through the public API: each test runs on an
SQLite file and on a PostgreSQL log (tests/contract/conftest.py), with two gateways where the
behaviour is about more than one."""

from __future__ import annotations

import pytest

from harness import never_called, procs
from grouping import Transactions, source as group_source
from key_race import run as race_on_one_key
from turnlog import LeaseTimeout, SessionSource, StaleLease, Turnlog

from chat import ALICE, BOB

T0 = "2026-03-01T10:00:00+00:00"


def answer(text: str):
    return lambda history, item: text


def sent_to(box: list[str]):
    return box.append


@pytest.fixture
def clock():
    from turnlog import ManualClock
    return ManualClock(T0)


def test_processes_racing_on_one_key_get_one_session_per_round(backend, make_turnlog):
    make_turnlog().close()  # the schema exists before the race, as after a gateway's first start
    processes, rounds = 4, 5
    result = race_on_one_key(backend.db, [backend.views() for _ in range(processes)], rounds)
    assert result["errors"] == [] and result["exit_codes"] == [0] * processes
    assert all(len(set(ids)) == 1 and len(ids) == processes for ids in result["ids"].values()), result["ids"]
    assert [result["created"][n] for n in range(rounds)] == [1] * rounds


def test_the_lease_fences_a_stale_writer_after_a_takeover(make_turnlog, clock):
    a, b = make_turnlog(owner="gateway-a"), make_turnlog(owner="gateway-b")
    session_id = a.get_or_create_session(ALICE).session_id
    key = a.routing_key(ALICE)
    held = a.turns.acquire_lease(session_id, key, timeout=1)
    with pytest.raises(LeaseTimeout):
        b.turns.acquire_lease(session_id, key, timeout=0)
    clock.advance(3600)  # far past the lease's time to live
    taken = b.turns.acquire_lease(session_id, key, timeout=1)
    assert taken.epoch > held.epoch
    with pytest.raises(StaleLease):
        a.turns.append_message(held, "assistant", "too late")
    b.turns.append_message(taken, "assistant", "in time")
    b.turns.release_lease(taken)
    assert [m["content"] for m in a.transcript(session_id)] == ["in time"]
    acquired = [h for h in a.history(session_id) if h.event == "LeaseAcquired"]
    assert [h.data.get("taken_over_from") is not None for h in acquired] == [False, True]


def test_a_turn_is_recorded_as_its_events_with_actor_and_cause(make_turnlog):
    a, b = make_turnlog(owner="gateway-a"), make_turnlog(owner="gateway-b")
    sent: list[str] = []
    a.handle_message(ALICE, "deploy the gateway", answer("deployed"), sent_to(sent))
    assert sent == ["deployed"]
    history = b.history(b.routing_key(ALICE))
    assert {h.event for h in history} >= {"RouteRegistered", "SessionCreated", "LeaseAcquired", "MessageAppended",
                                          "DeliveryRecorded", "DeliveryDelivered", "LeaseReleased"}
    assert all(h.actor and h.cause for h in history)
    assert history == a.history(a.routing_key(ALICE))
    session_id = b.get_or_create_session(ALICE).session_id
    assert [(m["role"], m["content"]) for m in b.transcript(session_id)] == [
        ("user", "deploy the gateway"), ("assistant", "deployed")]
    assert [row.state for row in b.ledger()] == ["delivered"]


IN_AGENT = """
from turnlog import SessionSource
src = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", user_name="alice",
                    message_id="m1")
t = kit.turnlog()
t.start_gateway("main")
def think(history, item):
    kit.ready(session_id=history[-1].session_id)
    kit.hang()
t.handle_message(src, "please look into the build", think, print)
"""


def test_a_gateway_killed_in_its_agent_is_recovered_and_the_turn_resumed_once(backend, make_turnlog, tmp_path):
    killed = procs.crash(backend.db, IN_AGENT, at=T0, work=tmp_path, views=backend.views_prefix())
    session_id = killed.data["session_id"]
    t = make_turnlog()
    [turn] = t.start_gateway("main").recovery.interrupted
    assert turn.action == "resume_pending"
    assert t.sweep_deliveries(never_called).delivered == []
    seen: list[list[tuple[str, str]]] = []
    sent: list[str] = []

    def agent(history, item):
        seen.append([(m.role, m.content) for m in history])
        return "picking up where I left off"

    [outcome] = t.resume_interrupted(agent, sent.append)
    assert outcome.session_id == session_id and outcome.delivery_state == "delivered"
    assert seen[0][0] == ("user", "please look into the build") and seen[0][-1][0] == "system"
    assert sent == ["picking up where I left off"]
    assert t.resume_interrupted(never_called, never_called) == []
    assert [m["role"] for m in t.transcript(session_id)] == ["user", "system", "assistant"]


def test_the_sweep_resends_a_reply_owed_by_a_gone_boot_once_with_the_prefix(make_turnlog, clock):
    first = make_turnlog(owner="gateway-a")
    first.start_gateway("main")

    def platform_down(text: str) -> None:
        raise ConnectionError("platform API unavailable")

    first.handle_message(ALICE, "what is the answer?", answer("42"), platform_down)
    assert [row.state for row in first.ledger()] == ["failed"]
    clock.advance(120)
    later = make_turnlog(owner="gateway-b")  # the first boot never stopped: it is gone
    later.start_gateway("main")
    resent: list[tuple[str, str]] = []
    report = later.sweep_deliveries(lambda target, text: resent.append((target["chat_id"], text)))
    assert len(report.delivered) == 1
    [(chat_id, text)] = resent
    assert chat_id == "42" and text.startswith("♻️ Recovered reply") and text.endswith("42")
    assert later.sweep_deliveries(never_called).delivered == []
    assert [row.state for row in later.ledger()] == ["delivered"]


def test_search_finds_text_written_by_another_gateway(make_turnlog):
    a, b = make_turnlog(owner="gateway-a"), make_turnlog(owner="gateway-b")
    a.handle_message(ALICE, "please check the 数据库迁移 kiwi", answer("kiwi checked"), never_called_ok())
    b.handle_message(BOB, "deploy the gateway", answer("deployed"), never_called_ok())
    alice_session = a.get_or_create_session(ALICE).session_id
    assert [h.session_id for h in b.search("kiwi")] == [alice_session, alice_session]
    assert [h.session_id for h in b.search("数据库")] == [alice_session]
    assert b.search("deploy")[0].platform == "slack"
    assert a.search("kiwi", key=a.routing_key(BOB)) == []


def test_another_gateways_turn_moves_the_session_version_and_makes_a_warm_agent_stale(make_turnlog, clock):
    from turnlog import AgentCache
    a, b = make_turnlog(owner="gateway-a"), make_turnlog(owner="gateway-b")
    session_id = a.get_or_create_session(ALICE).session_id
    assert a.session_version(session_id) == 0
    built = []
    cache = AgentCache(lambda sid: built.append(sid) or object(), memory_high_mb="off", clock=clock)
    cache.attach(a)
    with cache.checkout(session_id):
        a.handle_message(ALICE, "one", answer("first"), never_called_ok())
    assert a.session_version(session_id) == b.session_version(session_id) == 2
    b.handle_message(ALICE, "two", answer("second"), never_called_ok())
    assert a.session_version(session_id) == 4
    with cache.checkout(session_id):
        pass
    assert built == [session_id, session_id] and cache.stats().misses_by_reason["stale"] == 1


def never_called_ok():
    return lambda text: None


def test_time_travel_shows_the_routing_map_and_diff_of_a_past_moment(make_turnlog, clock):
    t = make_turnlog()
    t.handle_message(ALICE, "hello", answer("hi"), never_called_ok())
    clock.advance(60)
    t.handle_message(BOB, "deploy", answer("done"), never_called_ok())
    registered = next(h.position for h in t.history(t.routing_key(BOB)) if h.event == "RouteRegistered")
    assert len(t.at(f"#{registered - 1}").routes()) == 1
    assert len(t.at(f"#{registered}").routes()) == 2
    assert len(t.at("2026-03-01T09:59:00+00:00").routes()) == 0
    assert len(t.at("2026-03-01T10:00:30+00:00").routes()) == 1
    head = t.history(t.routing_key(BOB))[-1].position
    changed = t.diff(f"#{registered - 1}", f"#{head}")
    assert t.routing_key(BOB) in changed["keys"] and t.routing_key(ALICE) not in changed["keys"]


def test_read_models_rebuild_from_the_log_and_verify_against_it(make_turnlog):
    t = make_turnlog()
    t.handle_message(ALICE, "please check the kiwi", answer("kiwi checked"), never_called_ok())
    t.handle_message(BOB, "deploy the gateway", answer("deployed"), never_called_ok())
    before = (t.routes(), t.sessions(), t.ledger(), t.search("kiwi"))
    report = t.maintenance.rebuild()
    assert report["events"] == report["head"]
    assert (t.routes(), t.sessions(), t.ledger(), t.search("kiwi")) == before
    assert t.maintenance.verify()["ok"]


def test_a_fresh_gateway_catches_its_empty_read_models_up_from_the_log(backend, make_turnlog):
    t = make_turnlog()
    t.handle_message(ALICE, "hello", answer("hi"), never_called_ok())
    late = make_turnlog(owner="gateway-late")
    assert late.routes() == t.routes() and late.sessions() == t.sessions()
    assert [m["content"] for m in late.transcript(t.get_or_create_session(ALICE).session_id)] == ["hello", "hi"]


def test_the_hash_chain_verifies_every_event_written(make_turnlog):
    a, b = make_turnlog(owner="gateway-a"), make_turnlog(owner="gateway-b")
    a.handle_message(ALICE, "hello", answer("hi"), never_called_ok())
    b.handle_message(BOB, "deploy", answer("done"), never_called_ok())
    assert a.maintenance.verify_chain().breaks == [] and b.maintenance.verify_chain().breaks == []
    assert b.maintenance.verify_chain().breaks == []


def test_a_closed_engine_leaves_the_log_for_the_next_one(backend, make_turnlog):
    first = make_turnlog()
    first.handle_message(ALICE, "hello", answer("hi"), never_called_ok())
    first.close()
    with Turnlog(backend.db, views=backend.views()) as reopened:
        assert [r.session_key for r in reopened.routes()] == [first.routing_key(ALICE)]


def test_a_group_commit_fails_only_its_stale_member(make_turnlog):
    """Saves queued behind a commit share one transaction on either backend; a member whose lease
    another gateway revoked is refused alone, the others are written."""
    a = make_turnlog(owner="gateway-a")
    b = make_turnlog(owner="gateway-b")
    routed = a.get_or_create_session(ALICE)
    token = a.turns.acquire_lease(routed.session_id, routed.session_key, timeout=0.05)
    assert b.command(ALICE, "/stop").changed is True
    tx = Transactions(a)
    results = tx.group_behind(lambda: a.accept(group_source(0), "first"), [
        lambda: a.accept(group_source(1), "one"),
        lambda: a.turns.append_message(token, "assistant", "late reply"),
        lambda: a.accept(group_source(2), "two")])
    assert isinstance(results[2], StaleLease)
    assert not [r for i, r in enumerate(results) if i != 2 and isinstance(r, Exception)]
    assert tx.failed[0].count("InboundAccepted") == 2  # the group, refused on the stale renewal
    assert {s.chat_id for s in b.pending_inbound()} == {"100", "101", "102"}
    assert b.transcript(routed.session_id) == []

    tx.written.clear()
    results = tx.group_behind(lambda: a.accept(group_source(3), "three"),
                              [lambda n=n: a.accept(group_source(n), f"{n}") for n in (4, 5, 6)])
    assert not [r for r in results if isinstance(r, Exception)]
    assert [topics.count("InboundAccepted") for topics in tx.written] == [1, 3]
