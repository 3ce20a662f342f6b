"""A log whose first turns recorded a route's binding and a lease's first acquisition as events of
their own (tests/data/first-turn-v1-separate-events.db, written by turnlog f27f2f0: RouteRegistered
version 1 + RouteBound, LeaseOpened + LeaseAcquired) replays to the routes, leases, audit and
timeline it had, and its keys' turns go on from there."""

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog

from chat import echo

OLD_DB = Path(__file__).parents[1] / "data" / "first-turn-v1-separate-events.db"
TELEGRAM_DM = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", user_name="alice")
DISCORD_DM = SessionSource(platform="discord", chat_type="dm", chat_id="7", user_id="7", user_name="bob")
# SequentialIds on the old log's clock: the telegram key's session, the discord key's first and its after /new
S_ALICE, S_BOB1, S_BOB2 = "20260101_000000_00000001", "20260101_000100_00000002", "20260101_000300_00000003"


@pytest.fixture
def old(tmp_path):
    db = tmp_path / "old.db"
    shutil.copy(OLD_DB, db)
    clock = ManualClock("2026-01-01T01:00:00+00:00")  # after the old log's turns
    with Turnlog(str(db), clock=clock, session_ids=SequentialIds(), owner="new") as t:
        yield t


def test_the_old_log_rebuilds_to_the_routes_leases_audit_and_timeline_it_had(old):
    report = old.maintenance.verify()
    assert report["ok"], report
    routes = {r.session_key: (r.session_id, r.bound_reason) for r in old.routes()}
    assert routes == {old.routing_key(TELEGRAM_DM): (S_ALICE, "first_message"),
                      old.routing_key(DISCORD_DM): (S_BOB2, "route_detached")}


def test_the_old_logs_audit_names_its_separate_events(old):
    names = [h.event for h in old.history(S_ALICE)]
    assert names[:3] == ["SessionCreated", "RouteBound", "LeaseOpened"], names
    acquired = [h.data["epoch"] for h in old.history(S_ALICE) if h.event == "LeaseAcquired"]
    assert acquired == [1, 2]
    key_events = [(h.event, h.session_id) for h in old.history(old.routing_key(DISCORD_DM), types=["RouteRegistered", "RouteBound"])]
    assert key_events == [("RouteRegistered", None), ("RouteBound", S_BOB1), ("RouteBound", S_BOB2)]

def test_time_travel_through_the_old_logs_first_turn(old):
    # positions 2, 3: the telegram key's RouteRegistered, RouteBound; 7, 8: its LeaseOpened, LeaseAcquired
    assert [r["session_id"] for r in old.at(2).routes(old.routing_key(TELEGRAM_DM))] == [None]
    assert [r["session_id"] for r in old.at(3).routes(old.routing_key(TELEGRAM_DM))] == [S_ALICE]
    assert (old.at(7).lease(S_ALICE)["epoch"], old.at(7).lease(S_ALICE)["owner"]) == (0, None)
    assert (old.at(8).lease(S_ALICE)["epoch"], old.at(8).lease(S_ALICE)["owner"]) == (1, "old")


def test_turns_go_on_from_the_old_logs_routes_and_leases(old):
    telegram, = old.handle_message(replace(TELEGRAM_DM, message_id="a9"), "later", echo, lambda text: None)
    discord, = old.handle_message(replace(DISCORD_DM, message_id="b9"), "later", echo, lambda text: None)
    assert (telegram.session_id, telegram.epoch, telegram.user_seq) == (S_ALICE, 3, 5)
    assert (discord.session_id, discord.epoch, discord.user_seq) == (S_BOB2, 2, 3)
    # the discord key's first session is still its own to /resume: the old RouteBound names it
    assert old.command(replace(DISCORD_DM, message_id="b10"), f"/resume {S_BOB1}").session_id == S_BOB1
    assert old.maintenance.verify()["ok"]
