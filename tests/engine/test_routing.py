"""The routing state machine of docs/behaviour.md §3.5 and the session mutators of §3.7 and §4, driven through
`Turnlog.get_or_create_session` and friends with an injected clock and sequential session ids."""

from __future__ import annotations

import sys
import threading
import time
from datetime import datetime
from typing import Any

import pytest

from turnlog.api import Turnlog
from turnlog.clock import ManualClock, SequentialIds
from turnlog.config import EngineConfig
from turnlog.domain.policy import ResetPolicies, ResetPolicy
from turnlog.domain.source import SessionSource
from turnlog.errors import InvalidRequest, NotFound

from chat import ALICE

START = "2026-03-01T10:00:00+00:00"
ALICE_KEY = "agent:main:telegram:dm:42"
BOB = SessionSource(platform="discord", chat_type="dm", chat_id="77", user_id="77", user_name="bob")


def policy(**fields: Any) -> EngineConfig:
    return EngineConfig(reset=ResetPolicies(default=ResetPolicy(**fields)), freshness_window_s=3600)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def open_engine(tmp_path, clock):
    opened: list[Turnlog] = []

    def open_(config: EngineConfig | None = None, start_clock: ManualClock | Any = None) -> Turnlog:
        engine = Turnlog(tmp_path / "turnlog.db", config=config or policy(mode="none"),
                         clock=start_clock or clock, session_ids=SequentialIds())
        opened.append(engine)
        return engine

    yield open_
    for engine in opened:
        engine.close()


def session_row(engine: Turnlog, session_id: str) -> dict[str, Any]:
    return next(s for s in engine.sessions() if s.session_id == session_id)


def route_of(engine: Turnlog, session_key: str) -> dict[str, Any]:
    (row,) = [r for r in engine.routes() if r.session_key == session_key]
    return row


def iso(when: datetime) -> str:
    return when.isoformat()


# --- first message, reuse, activity -----------------------------------------------------


def test_first_message_creates_a_session_bound_to_the_key(open_engine, clock):
    t = open_engine()
    result = t.get_or_create_session(ALICE)

    assert result.created is True
    assert result.reason == "first_message"
    assert result.previous_session_id is None
    assert result.session_key == "agent:main:telegram:dm:42"
    assert result.session_id == "20260301_100000_00000001"
    row = session_row(t, result.session_id)
    assert row.created_reason == "first_message"
    assert row.created_at == row.updated_at == START
    assert row.end_reason is None
    assert route_of(t, result.session_key).session_id == result.session_id


def test_same_key_reuses_the_session_and_touches_its_activity(open_engine, clock):
    t = open_engine()
    first = t.get_or_create_session(ALICE)
    later = clock.advance(minutes=5)

    again = t.get_or_create_session(ALICE)

    assert again.created is False
    assert again.reason is None
    assert again.session_id == first.session_id
    assert len(t.sessions()) == 1
    assert session_row(t, first.session_id).updated_at == iso(later)


def test_touch_activity_false_keeps_updated_at(open_engine, clock):
    t = open_engine()
    first = t.get_or_create_session(ALICE)
    clock.advance(minutes=5)

    again = t.get_or_create_session(ALICE, touch_activity=False)

    assert again.session_id == first.session_id
    assert again.created is False
    assert session_row(t, first.session_id).updated_at == START
    assert [e.event for e in t.history(ALICE)].count("ActivityTouched") == 0


def test_touch_activity_false_records_a_new_origin_without_touching(open_engine, clock):
    t = open_engine()
    first = t.get_or_create_session(ALICE)
    clock.advance(minutes=5)
    renamed = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", user_name="Alice B.")

    again = t.get_or_create_session(renamed, touch_activity=False)

    assert again.session_id == first.session_id
    assert route_of(t, ALICE_KEY).origin["user_name"] == "Alice B."
    assert session_row(t, first.session_id).updated_at == START


# --- idle ---------------------------------------------------------------------------------


def test_idle_session_is_kept_at_exactly_the_idle_boundary(open_engine, clock):
    t = open_engine(policy(mode="idle", idle_minutes=1440))
    first = t.get_or_create_session(ALICE)
    clock.advance(minutes=1440)

    again = t.get_or_create_session(ALICE)

    assert again.session_id == first.session_id
    assert again.created is False


def test_idle_session_is_replaced_one_second_after_the_boundary(open_engine, clock):
    t = open_engine(policy(mode="idle", idle_minutes=1440))
    first = t.get_or_create_session(ALICE)
    clock.advance(minutes=1440, seconds=1)

    again = t.get_or_create_session(ALICE)

    assert again.created is True
    assert again.reason == "idle"
    assert again.previous_session_id == first.session_id
    old = session_row(t, first.session_id)
    assert old.end_reason == "idle"
    assert old.routed is False
    assert session_row(t, again.session_id).previous_session_id == first.session_id
    assert route_of(t, again.session_key).session_id == again.session_id


def test_idle_clock_counts_from_the_last_touch_not_from_creation(open_engine, clock):
    t = open_engine(policy(mode="idle", idle_minutes=1440))
    first = t.get_or_create_session(ALICE)
    clock.advance(minutes=1000)
    t.get_or_create_session(ALICE)
    clock.advance(minutes=1000)  # 2000 min after creation, 1000 after the touch

    assert t.get_or_create_session(ALICE).session_id == first.session_id


def test_untouched_activity_lets_the_idle_timer_run(open_engine, clock):
    t = open_engine(policy(mode="idle", idle_minutes=1440))
    first = t.get_or_create_session(ALICE)
    clock.advance(minutes=1000)
    t.get_or_create_session(ALICE, touch_activity=False)
    clock.advance(minutes=1000)

    again = t.get_or_create_session(ALICE)

    assert again.reason == "idle"
    assert again.previous_session_id == first.session_id


# --- daily at 04:00 Asia/Shanghai (UTC+8: the boundary is 20:00 UTC the day before) ---------


SHANGHAI_4AM = dict(mode="daily", at_hour=4, timezone="Asia/Shanghai")


def test_daily_resets_a_session_last_active_one_second_before_4am_shanghai(open_engine):
    clock = ManualClock("2026-03-01T19:59:59+00:00")  # 03:59:59 on 2 March in Shanghai
    t = open_engine(policy(**SHANGHAI_4AM), clock)
    first = t.get_or_create_session(ALICE)
    clock.advance(seconds=2)  # 04:00:01 Shanghai

    again = t.get_or_create_session(ALICE)

    assert again.created is True
    assert again.reason == "daily"
    assert session_row(t, first.session_id).end_reason == "daily"


def test_daily_keeps_a_session_last_active_one_second_after_4am_shanghai(open_engine):
    clock = ManualClock("2026-03-01T20:00:01+00:00")  # 04:00:01 on 2 March in Shanghai
    t = open_engine(policy(**SHANGHAI_4AM), clock)
    first = t.get_or_create_session(ALICE)
    clock.advance(hours=23, minutes=59, seconds=58)  # 03:59:59 on 3 March in Shanghai

    assert t.get_or_create_session(ALICE).session_id == first.session_id


def test_daily_keeps_a_session_last_active_exactly_at_4am_shanghai(open_engine):
    clock = ManualClock("2026-03-01T20:00:00+00:00")  # 04:00:00 on 2 March in Shanghai
    t = open_engine(policy(**SHANGHAI_4AM), clock)
    first = t.get_or_create_session(ALICE)
    clock.advance(hours=1)

    assert t.get_or_create_session(ALICE).session_id == first.session_id


def test_daily_boundary_is_4am_in_the_configured_zone_not_in_utc(open_engine):
    clock = ManualClock("2026-03-02T03:59:59+00:00")  # 11:59:59 in Shanghai
    t = open_engine(policy(**SHANGHAI_4AM), clock)
    first = t.get_or_create_session(ALICE)
    clock.advance(seconds=2)  # past 04:00 UTC, still noon in Shanghai

    assert t.get_or_create_session(ALICE).session_id == first.session_id


# --- suspended ---------------------------------------------------------------------------------


def test_suspended_session_is_replaced_on_the_next_message(open_engine, clock):
    t = open_engine()
    first = t.get_or_create_session(ALICE)
    assert t.suspend(ALICE, "operator") is True
    assert session_row(t, first.session_id).suspended is True
    clock.advance(seconds=1)

    again = t.get_or_create_session(ALICE)

    assert again.created is True
    assert again.reason == "suspended"
    assert again.previous_session_id == first.session_id
    assert session_row(t, first.session_id).end_reason == "suspended"
    assert session_row(t, again.session_id).suspended is False


def test_suspending_twice_changes_nothing_the_second_time(open_engine):
    t = open_engine()
    t.get_or_create_session(ALICE)
    assert t.suspend(ALICE) is True
    assert t.suspend(ALICE) is False


# --- resume_pending and the freshness window ----------------------------------------------------


def test_resume_pending_within_the_freshness_window_keeps_the_session(open_engine, clock):
    t = open_engine(policy(mode="idle"))
    first = t.get_or_create_session(ALICE)
    assert t.mark_resume_pending(ALICE, "restart_timeout") is True
    clock.advance(seconds=3600)

    again = t.get_or_create_session(ALICE)

    assert again.session_id == first.session_id
    row = session_row(t, first.session_id)
    assert row.resume_pending is True  # cleared only after a successful turn
    assert row.resume_reason == "restart_timeout"


def test_resume_pending_past_the_window_expires_under_mode_idle(open_engine, clock):
    t = open_engine(policy(mode="idle"))
    first = t.get_or_create_session(ALICE)
    t.mark_resume_pending(ALICE)
    clock.advance(seconds=3601)

    again = t.get_or_create_session(ALICE)

    assert again.created is True
    assert again.reason == "resume_pending_expired"
    assert session_row(t, first.session_id).end_reason == "resume_pending_expired"


def test_freshness_window_counts_from_the_marker_not_from_later_activity(open_engine, clock):
    t = open_engine(policy(mode="idle"))
    first = t.get_or_create_session(ALICE)
    t.mark_resume_pending(ALICE)
    clock.advance(minutes=30)
    assert t.get_or_create_session(ALICE).session_id == first.session_id  # touches activity
    clock.advance(minutes=31)

    assert t.get_or_create_session(ALICE).reason == "resume_pending_expired"


def test_resume_pending_never_expires_under_mode_none(open_engine, clock):
    t = open_engine(policy(mode="none"))
    first = t.get_or_create_session(ALICE)
    t.mark_resume_pending(ALICE)
    clock.advance(days=3)

    again = t.get_or_create_session(ALICE)

    assert again.session_id == first.session_id
    assert session_row(t, first.session_id).resume_pending is True


def test_mark_resume_pending_is_refused_while_suspended(open_engine):
    t = open_engine()
    first = t.get_or_create_session(ALICE)
    t.suspend(ALICE)

    assert t.mark_resume_pending(ALICE) is False
    assert session_row(t, first.session_id).resume_pending is False


def test_clear_resume_pending_is_false_when_not_set(open_engine):
    t = open_engine()
    t.get_or_create_session(ALICE)

    assert t.clear_resume_pending(ALICE) is False


def test_clear_resume_pending_clears_a_set_marker(open_engine):
    t = open_engine()
    first = t.get_or_create_session(ALICE)
    t.mark_resume_pending(ALICE, "restart_timeout")

    assert t.clear_resume_pending(ALICE) is True
    row = session_row(t, first.session_id)
    assert (row.resume_pending, row.resume_reason, row.resume_marked_at) == (False, None, None)


# --- background-process guard ------------------------------------------------------------------


def test_background_guard_reporting_a_live_process_keeps_an_idle_session(open_engine, clock):
    asked: list[tuple[str, str]] = []

    def guard(session_key: str, session_id: str) -> bool:
        asked.append((session_key, session_id))
        return True

    t = open_engine(EngineConfig(reset=ResetPolicies(default=ResetPolicy(mode="idle")), background_guard=guard))
    first = t.get_or_create_session(ALICE)
    clock.advance(days=2)

    again = t.get_or_create_session(ALICE)

    assert again.session_id == first.session_id
    assert asked == [(first.session_key, first.session_id)]


def test_background_guard_that_raises_keeps_an_idle_session(open_engine, clock):
    def guard(session_key: str, session_id: str) -> bool:
        raise RuntimeError("process registry unreadable")

    t = open_engine(EngineConfig(reset=ResetPolicies(default=ResetPolicy(mode="idle")), background_guard=guard))
    first = t.get_or_create_session(ALICE)
    clock.advance(days=2)

    assert t.get_or_create_session(ALICE).session_id == first.session_id


def test_background_guard_reporting_nothing_lets_the_idle_reset_happen(open_engine, clock):
    t = open_engine(EngineConfig(reset=ResetPolicies(default=ResetPolicy(mode="idle")),
                                 background_guard=lambda key, session_id: False))
    t.get_or_create_session(ALICE)
    clock.advance(days=2)

    assert t.get_or_create_session(ALICE).reason == "idle"


def test_background_guard_does_not_save_a_suspended_session(open_engine, clock):
    t = open_engine(EngineConfig(reset=ResetPolicies(default=ResetPolicy(mode="idle")),
                                 background_guard=lambda key, session_id: True))
    t.get_or_create_session(ALICE)
    t.suspend(ALICE)

    assert t.get_or_create_session(ALICE).reason == "suspended"


# --- force_new -------------------------------------------------------------------------------


def test_force_new_ends_the_previous_session_with_session_reset(open_engine, clock):
    t = open_engine()
    first = t.get_or_create_session(ALICE)
    clock.advance(seconds=1)

    fresh = t.get_or_create_session(ALICE, force_new=True)

    assert fresh.created is True
    assert fresh.reason == "force_new"
    assert fresh.previous_session_id == first.session_id
    assert session_row(t, first.session_id).end_reason == "session_reset"
    assert route_of(t, fresh.session_key).session_id == fresh.session_id


# --- switch_session (docs/behaviour.md §4) -------------------------------------------------------------------


def test_switch_to_an_unknown_key_returns_none(open_engine):
    t = open_engine()
    target = t.get_or_create_session(ALICE).session_id

    assert t.switch_session("agent:main:telegram:dm:nobody", target) is None
    assert t.switch_session(BOB, target) is None
    assert [r.session_key for r in t.routes()] == ["agent:main:telegram:dm:42"]


def test_switch_to_the_current_session_changes_nothing(open_engine):
    t = open_engine()
    current = t.get_or_create_session(ALICE)
    before = t.history(ALICE)

    result = t.switch_session(ALICE, current.session_id)

    assert result is not None
    assert (result.session_id, result.created, result.reason, result.position) == (current.session_id, False, None, 0)
    assert t.history(ALICE) == before


def test_switch_ends_the_old_session_and_reopens_an_ended_target(open_engine, clock):
    t = open_engine()
    first = t.get_or_create_session(ALICE)
    clock.advance(seconds=1)
    second = t.get_or_create_session(ALICE, force_new=True)
    assert session_row(t, first.session_id).end_reason == "session_reset"
    clock.advance(seconds=1)

    result = t.switch_session(ALICE, first.session_id)

    assert result is not None
    assert result.session_id == first.session_id
    assert result.reason == "session_switch"
    assert result.previous_session_id == second.session_id
    assert session_row(t, second.session_id).end_reason == "session_switch"
    reopened = session_row(t, first.session_id)
    assert (reopened.end_reason, reopened.ended_at) == (None, None)
    assert route_of(t, ALICE_KEY).session_id == first.session_id
    assert t.get_or_create_session(ALICE).session_id == first.session_id


def test_switch_clears_the_flags_of_the_target(open_engine, clock):
    t = open_engine()
    first = t.get_or_create_session(ALICE)
    t.suspend(ALICE)
    second = t.get_or_create_session(ALICE)
    assert second.reason == "suspended"

    t.switch_session(ALICE, first.session_id)

    row = session_row(t, first.session_id)
    assert (row.suspended, row.end_reason) == (False, None)
    assert t.get_or_create_session(ALICE).session_id == first.session_id


def test_several_keys_may_point_at_one_session(open_engine):
    t = open_engine()
    alice = t.get_or_create_session(ALICE)
    bob = t.get_or_create_session(BOB)

    t.switch_session(BOB, alice.session_id, force=True)  # alice's session: another key

    assert {r.session_key: r.session_id for r in t.routes()} == {
        alice.session_key: alice.session_id, bob.session_key: alice.session_id}
    assert session_row(t, bob.session_id).end_reason == "session_switch"
    assert t.get_or_create_session(ALICE).session_id == t.get_or_create_session(BOB).session_id


def test_switch_to_an_unknown_session_raises_not_found(open_engine):
    t = open_engine()
    t.get_or_create_session(ALICE)

    with pytest.raises(NotFound):
        t.switch_session(ALICE, "20990101_000000_deadbeef")


# --- ids containing ':' ----------------------------------------------------------------------------


def test_sources_sharing_a_key_string_get_different_routes_and_sessions(open_engine):
    chat_with_colon = SessionSource(platform="telegram", chat_type="dm", chat_id="1:2")
    chat_in_thread = SessionSource(platform="telegram", chat_type="dm", chat_id="1", thread_id="2")
    t = open_engine()

    a = t.get_or_create_session(chat_with_colon)
    b = t.get_or_create_session(chat_in_thread)

    assert a.session_key == b.session_key == "agent:main:telegram:dm:1:2"
    assert a.route_id != b.route_id
    assert a.session_id != b.session_id
    assert len(t.routes()) == 2
    assert t.get_or_create_session(chat_with_colon).session_id == a.session_id
    assert t.get_or_create_session(chat_in_thread).session_id == b.session_id
    with pytest.raises(InvalidRequest):
        t.suspend(a.session_key)  # the string alone is ambiguous
    assert t.suspend(chat_in_thread) is True
    assert t.get_or_create_session(chat_with_colon).session_id == a.session_id


# --- in-process single flight (docs/behaviour.md §3.6) -------------------------------------------------------


class GatedClock(ManualClock):
    """Holds the first thread that reads the time until `release` is set."""

    def __init__(self, start: str) -> None:
        super().__init__(start)
        self.entered = threading.Event()
        self.release = threading.Event()
        self.leader: int | None = None
        self.readers: set[int] = set()
        self._gate = threading.Lock()

    def now(self) -> datetime:
        me = threading.get_ident()
        with self._gate:
            self.readers.add(me)
            first = self.leader is None
            if first:
                self.leader = me
        if first:
            self.entered.set()
            assert self.release.wait(timeout=30), "the test never released the clock"
        return super().now()


def waiting_inside_routing(thread: threading.Thread) -> bool:
    """The thread is parked on a threading wait somewhere below get_or_create_session."""
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None or frame.f_code.co_name != "wait" or not frame.f_code.co_filename.endswith("threading.py"):
        return False
    while frame is not None:
        if frame.f_code.co_name == "get_or_create_session":
            return True
        frame = frame.f_back
    return False


def test_eight_threads_on_one_key_share_the_leaders_result(open_engine):
    clock = GatedClock(START)
    t = open_engine(start_clock=clock)
    start = threading.Barrier(8)
    results: dict[int, Any] = {}

    def call() -> None:
        start.wait()
        results[threading.get_ident()] = t.get_or_create_session(ALICE)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    assert clock.entered.wait(timeout=30)
    leader = clock.leader
    followers = [th for th in threads if th.ident != leader]
    deadline = time.monotonic() + 30
    # Release the leader once every follower is either parked in the call or already done.
    while not all(waiting_inside_routing(th) or not th.is_alive() for th in followers):
        assert time.monotonic() < deadline, "followers never settled"
        time.sleep(0.001)
    clock.release.set()
    for thread in threads:
        thread.join(timeout=30)

    assert len(results) == 8
    leader_result = results[leader]
    assert all(r is leader_result for r in results.values())
    assert leader_result.created is True
    assert clock.readers == {leader}  # only the leader ran the routing decision
    assert len(t.sessions()) == 1
    assert [e.event for e in t.history(ALICE)].count("SessionCreated") == 1


def test_single_flight_slot_is_freed_after_the_call(open_engine, clock):
    t = open_engine()
    first = t.get_or_create_session(ALICE)
    clock.advance(seconds=1)

    again = t.get_or_create_session(ALICE)

    assert again is not first
    assert again.created is False
