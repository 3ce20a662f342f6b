from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum

import pytest

from turnlog.domain.policy import (
    END_REASONS,
    ResetPolicies,
    ResetPolicy,
    explicit_reset_notice,
    reset_notice,
    reset_reason,
    route_decision,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
IDLE = ResetPolicy(mode="idle")
DAILY = ResetPolicy(mode="daily")
BOTH = ResetPolicy(mode="both")


@dataclass(frozen=True)
class Flags:
    last_activity: datetime
    suspended: bool = False
    resume_pending: bool = False
    resume_marked_at: datetime | None = None


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


# --- ResetPolicy -------------------------------------------------------------------


def test_policy_defaults_follow_the_seed():
    policy = ResetPolicy()
    assert policy.mode == "none"
    assert policy.idle_minutes == 1440
    assert policy.at_hour == 4
    assert policy.timezone == "UTC"
    assert policy.notify is True
    assert policy.notify_exclude_platforms == ("api_server", "webhook")
    assert policy.bg_process_max_age_hours == 24


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"mode": "sometimes"}, "sometimes"),
        ({"mode": "IDLE"}, "IDLE"),
        ({"at_hour": 24}, "at_hour"),
        ({"at_hour": -1}, "at_hour"),
        ({"idle_minutes": 0}, "idle_minutes"),
        ({"timezone": "Mars/Olympus_Mons"}, "Mars/Olympus_Mons"),
        ({"notify": "yes"}, "notify"),
        ({"notify_exclude_platforms": "webhook"}, "notify_exclude_platforms"),
        ({"bg_process_max_age_hours": float("nan")}, "bg_process_max_age_hours"),
    ],
)
def test_policy_rejects_bad_values_by_name(kwargs, named):
    with pytest.raises(ValueError, match=named):
        ResetPolicy(**kwargs)


def test_policy_accepts_a_list_of_excluded_platforms_and_stays_hashable():
    policy = ResetPolicy(notify_exclude_platforms=["webhook"])
    assert policy.notify_exclude_platforms == ("webhook",)
    assert hash(policy) == hash(ResetPolicy(notify_exclude_platforms=("webhook",)))


# --- policy resolution -------------------------------------------------------------


class Platform(Enum):
    TELEGRAM = "telegram"
    SLACK = "slack"


def test_platform_override_beats_chat_type_override_beats_default():
    telegram = ResetPolicy(mode="idle")
    groups = ResetPolicy(mode="daily")
    policies = ResetPolicies(
        default=ResetPolicy(mode="both"),
        by_platform={"telegram": telegram},
        by_chat_type={"group": groups},
    )
    assert policies.for_source("telegram", "group") is telegram
    assert policies.for_source("slack", "group") is groups
    assert policies.for_source("slack", "dm") is policies.default
    assert policies.for_source(None, None) is policies.default


def test_resolution_accepts_enum_platforms():
    telegram = ResetPolicy(mode="idle")
    policies = ResetPolicies(by_platform={Platform.TELEGRAM: telegram})
    assert policies.for_source(Platform.TELEGRAM, "dm") is telegram
    assert policies.for_source("telegram", "dm") is telegram
    assert policies.for_source(Platform.SLACK, "dm") is policies.default


def test_resolution_rejects_a_non_policy_override():
    with pytest.raises(ValueError, match="by_platform"):
        ResetPolicies(by_platform={"telegram": {"mode": "idle"}})


# --- idle --------------------------------------------------------------------------


def test_mode_none_never_resets():
    assert reset_reason(ResetPolicy(), last_activity=NOW - timedelta(days=400), now=NOW) is None


def test_idle_exactly_at_the_limit_is_kept():
    assert reset_reason(IDLE, last_activity=NOW - timedelta(minutes=1440), now=NOW) is None


def test_idle_one_second_past_the_limit_resets():
    last = NOW - timedelta(minutes=1440, seconds=1)
    assert reset_reason(IDLE, last_activity=last, now=NOW) == "idle"


def test_idle_one_microsecond_past_the_limit_resets():
    last = NOW - timedelta(minutes=1440, microseconds=1)
    assert reset_reason(IDLE, last_activity=last, now=NOW) == "idle"


def test_idle_sixty_minutes_updated_sixty_one_minutes_ago():
    policy = ResetPolicy(mode="idle", idle_minutes=60)
    assert reset_reason(policy, last_activity=NOW - timedelta(minutes=61), now=NOW) == "idle"
    assert reset_reason(policy, last_activity=NOW - timedelta(minutes=59), now=NOW) is None


def test_idle_mode_ignores_the_daily_boundary():
    # Active yesterday evening, before today's 04:00: daily would fire, idle does not.
    assert reset_reason(IDLE, last_activity=utc(2026, 11, 28, 23, 0), now=NOW) is None


def test_idle_compares_instants_not_wall_clock_across_offsets():
    # 12:00 in UTC+05:00 is 07:00 UTC: 23h before NOW, not 24h+.
    last = datetime(2026, 11, 28, 18, 0, tzinfo=timezone(timedelta(hours=5)))
    assert reset_reason(IDLE, last_activity=last, now=NOW) is None


# --- daily -------------------------------------------------------------------------


def test_daily_one_second_before_the_boundary_resets_and_one_second_after_is_kept():
    boundary = utc(2026, 11, 29, 4, 0)
    before = boundary - timedelta(seconds=1)
    after = boundary + timedelta(seconds=1)
    assert reset_reason(DAILY, last_activity=before, now=NOW) == "daily"
    assert reset_reason(DAILY, last_activity=after, now=NOW) is None


def test_daily_activity_exactly_at_the_boundary_is_kept():
    assert reset_reason(DAILY, last_activity=utc(2026, 11, 29, 4, 0), now=NOW) is None


def test_daily_before_at_hour_uses_yesterdays_boundary():
    now = utc(2026, 11, 29, 3, 30)
    assert reset_reason(DAILY, last_activity=utc(2026, 11, 28, 4, 0, 1), now=now) is None
    assert reset_reason(DAILY, last_activity=utc(2026, 11, 28, 3, 59, 59), now=now) == "daily"


SHANGHAI = ResetPolicy(mode="daily", timezone="Asia/Shanghai")


def test_daily_in_shanghai_boundary_is_0400_local():
    # 04:00 in Shanghai (UTC+8) on 10 May is 20:00 UTC on 9 May.
    now = utc(2026, 5, 10, 1, 0)
    assert reset_reason(SHANGHAI, last_activity=utc(2026, 5, 9, 19, 59, 59), now=now) == "daily"
    assert reset_reason(SHANGHAI, last_activity=utc(2026, 5, 9, 20, 0, 1), now=now) is None


def test_daily_in_shanghai_takes_the_local_hour_not_the_utc_hour():
    # 19:30 UTC is 03:30 the next day in Shanghai: before 04:00 local, so the
    # boundary is the previous local 04:00 (8 May 20:00 UTC), although the UTC
    # hour is past 4.
    now = utc(2026, 5, 9, 19, 30)
    assert reset_reason(SHANGHAI, last_activity=utc(2026, 5, 9, 3, 0), now=now) is None
    assert reset_reason(SHANGHAI, last_activity=utc(2026, 5, 8, 19, 59, 59), now=now) == "daily"


NEW_YORK = ResetPolicy(mode="daily", timezone="America/New_York")


def test_daily_in_new_york_winter_boundary_is_0900_utc():
    now = utc(2026, 1, 15, 12, 0)
    assert reset_reason(NEW_YORK, last_activity=utc(2026, 1, 15, 8, 59, 59), now=now) == "daily"
    assert reset_reason(NEW_YORK, last_activity=utc(2026, 1, 15, 9, 0, 1), now=now) is None


def test_daily_in_new_york_on_the_spring_forward_day_uses_daylight_time():
    # 8 March 2026 clocks go 02:00 EST -> 03:00 EDT; 04:00 EDT is 08:00 UTC,
    # where the day before it was 09:00 UTC.
    now = utc(2026, 3, 8, 12, 0)
    assert reset_reason(NEW_YORK, last_activity=utc(2026, 3, 8, 7, 59, 59), now=now) == "daily"
    assert reset_reason(NEW_YORK, last_activity=utc(2026, 3, 8, 8, 0, 1), now=now) is None
    assert reset_reason(NEW_YORK, last_activity=utc(2026, 3, 8, 8, 30), now=now) is None


def test_daily_in_new_york_on_the_fall_back_day_uses_standard_time():
    # 1 November 2026 clocks go 02:00 EDT -> 01:00 EST; 04:00 EST is 09:00 UTC.
    now = utc(2026, 11, 1, 12, 0)
    assert reset_reason(NEW_YORK, last_activity=utc(2026, 11, 1, 8, 59, 59), now=now) == "daily"
    assert reset_reason(NEW_YORK, last_activity=utc(2026, 11, 1, 9, 0, 1), now=now) is None


def test_daily_boundary_inside_the_skipped_hour_is_the_moment_clocks_jump():
    # at_hour 2 does not exist on 8 March in New York; the day starts over at 03:00 EDT (07:00 UTC).
    policy = ResetPolicy(mode="daily", at_hour=2, timezone="America/New_York")
    now = utc(2026, 3, 8, 12, 0)
    assert reset_reason(policy, last_activity=utc(2026, 3, 8, 6, 59, 59), now=now) == "daily"
    assert reset_reason(policy, last_activity=utc(2026, 3, 8, 7, 0, 1), now=now) is None


# --- both --------------------------------------------------------------------------


def test_both_checks_idle_first():
    last = NOW - timedelta(days=2)  # past the idle limit and before today's boundary
    assert reset_reason(BOTH, last_activity=last, now=NOW) == "idle"


def test_both_falls_through_to_daily():
    last = utc(2026, 11, 29, 3, 0)  # 9 hours ago: not idle, but before 04:00
    assert reset_reason(BOTH, last_activity=last, now=NOW) == "daily"


def test_both_keeps_a_session_active_since_the_boundary():
    assert reset_reason(BOTH, last_activity=utc(2026, 11, 29, 5, 0), now=NOW) is None


# --- background processes ----------------------------------------------------------

STALE = NOW - timedelta(days=3)


def test_background_flag_true_keeps_the_session():
    assert reset_reason(IDLE, last_activity=STALE, now=NOW, background=lambda: True) is None


def test_background_flag_false_lets_the_reset_happen():
    assert reset_reason(IDLE, last_activity=STALE, now=NOW, background=lambda: False) == "idle"


def test_no_background_processes_lets_the_reset_happen():
    assert reset_reason(IDLE, last_activity=STALE, now=NOW, background=lambda: []) == "idle"


def test_young_background_process_keeps_the_session():
    started = [NOW - timedelta(hours=1)]
    assert reset_reason(IDLE, last_activity=STALE, now=NOW, background=lambda: started) is None


def test_process_exactly_at_the_age_cap_still_keeps_the_session():
    started = [NOW - timedelta(hours=24)]
    assert reset_reason(IDLE, last_activity=STALE, now=NOW, background=lambda: started) is None


def test_process_older_than_the_age_cap_is_ignored():
    started = [NOW - timedelta(hours=24, seconds=1)]
    assert reset_reason(IDLE, last_activity=STALE, now=NOW, background=lambda: started) == "idle"


def test_one_young_process_among_old_ones_keeps_the_session():
    started = [NOW - timedelta(days=5), NOW - timedelta(minutes=5)]
    assert reset_reason(IDLE, last_activity=STALE, now=NOW, background=lambda: started) is None


@pytest.mark.parametrize("cap", [0, -1])
def test_age_cap_disabled_lets_any_process_keep_the_session(cap):
    policy = ResetPolicy(mode="idle", bg_process_max_age_hours=cap)
    started = [NOW - timedelta(days=30)]
    assert reset_reason(policy, last_activity=STALE, now=NOW, background=lambda: started) is None


def test_custom_age_cap():
    policy = ResetPolicy(mode="idle", bg_process_max_age_hours=2)
    started = [NOW - timedelta(hours=3)]
    assert reset_reason(policy, last_activity=STALE, now=NOW, background=lambda: started) == "idle"


def test_registry_that_raises_keeps_the_session():
    def broken() -> bool:
        raise RuntimeError("registry unavailable")

    assert reset_reason(IDLE, last_activity=STALE, now=NOW, background=broken) is None


def test_registry_reporting_a_naive_start_time_keeps_the_session():
    started = [datetime(2026, 11, 29, 11, 0)]
    assert reset_reason(IDLE, last_activity=STALE, now=NOW, background=lambda: started) is None


def test_background_does_not_matter_when_nothing_would_reset():
    recent = NOW - timedelta(minutes=1)
    assert reset_reason(IDLE, last_activity=recent, now=NOW, background=lambda: False) is None


# --- naive datetimes ---------------------------------------------------------------


def test_naive_now_is_rejected():
    with pytest.raises(ValueError, match="now"):
        reset_reason(IDLE, last_activity=NOW, now=datetime(2026, 11, 29, 12, 0))


def test_naive_last_activity_is_rejected():
    with pytest.raises(ValueError, match="last_activity"):
        reset_reason(IDLE, last_activity=datetime(2026, 11, 29, 11, 0), now=NOW)


def test_naive_datetimes_are_rejected_even_when_mode_is_none():
    with pytest.raises(ValueError, match="last_activity"):
        reset_reason(ResetPolicy(), last_activity=datetime(2026, 11, 29, 11, 0), now=NOW)


# --- route_decision: the state machine of a routed message --------------------------

RECENT = NOW - timedelta(minutes=5)


def test_route_keeps_a_healthy_session():
    assert route_decision(Flags(last_activity=RECENT), now=NOW, policy=IDLE) is None


def test_route_applies_the_reset_policy():
    assert route_decision(Flags(last_activity=STALE), now=NOW, policy=IDLE) == "idle"
    assert route_decision(Flags(last_activity=utc(2026, 11, 29, 3, 0)), now=NOW, policy=DAILY) == "daily"


def test_route_suspended_wins_over_everything():
    state = Flags(
        last_activity=RECENT,
        suspended=True,
        resume_pending=True,
        resume_marked_at=RECENT,
    )
    assert route_decision(state, now=NOW, policy=ResetPolicy(), background=lambda: True) == "suspended"


def test_route_suspended_wins_over_an_idle_reset():
    state = Flags(last_activity=STALE, suspended=True)
    assert route_decision(state, now=NOW, policy=IDLE) == "suspended"


def test_route_resume_pending_inside_the_window_is_kept():
    state = Flags(last_activity=RECENT, resume_pending=True, resume_marked_at=NOW - timedelta(seconds=3600))
    assert route_decision(state, now=NOW, policy=IDLE) is None


def test_route_resume_pending_outside_the_window_expires():
    state = Flags(last_activity=RECENT, resume_pending=True, resume_marked_at=NOW - timedelta(seconds=3601))
    assert route_decision(state, now=NOW, policy=IDLE) == "resume_pending_expired"


def test_route_resume_pending_honours_a_custom_window():
    state = Flags(last_activity=RECENT, resume_pending=True, resume_marked_at=NOW - timedelta(seconds=121))
    assert route_decision(state, now=NOW, policy=IDLE, freshness_window_s=120) == "resume_pending_expired"
    assert route_decision(state, now=NOW, policy=IDLE, freshness_window_s=180) is None


def test_route_resume_pending_reports_the_policy_reason_first():
    state = Flags(last_activity=STALE, resume_pending=True, resume_marked_at=STALE)
    assert route_decision(state, now=NOW, policy=IDLE) == "idle"


WEEK_IDLE = ResetPolicy(mode="idle", idle_minutes=7 * 1440)
THREE_DAYS_AGO = NOW - timedelta(days=3)


@pytest.mark.parametrize("window", [0, 0.0, -1])
def test_route_window_zero_or_less_disables_the_freshness_gate(window):
    state = Flags(last_activity=THREE_DAYS_AGO, resume_pending=True, resume_marked_at=THREE_DAYS_AGO)
    assert route_decision(state, now=NOW, policy=WEEK_IDLE, freshness_window_s=window) is None
    assert route_decision(state, now=NOW, policy=WEEK_IDLE) == "resume_pending_expired"


def test_route_mode_none_never_expires_a_resume_marker():
    state = Flags(last_activity=THREE_DAYS_AGO, resume_pending=True, resume_marked_at=THREE_DAYS_AGO)
    assert route_decision(state, now=NOW, policy=ResetPolicy(mode="none")) is None


def test_route_prefers_a_fresh_marker_over_old_activity():
    state = Flags(
        last_activity=NOW - timedelta(hours=2),
        resume_pending=True,
        resume_marked_at=NOW - timedelta(minutes=10),
    )
    assert route_decision(state, now=NOW, policy=IDLE) is None


def test_route_prefers_an_old_marker_over_fresh_activity():
    state = Flags(
        last_activity=NOW - timedelta(minutes=10),
        resume_pending=True,
        resume_marked_at=NOW - timedelta(hours=2),
    )
    assert route_decision(state, now=NOW, policy=IDLE) == "resume_pending_expired"


def test_route_without_a_marker_time_measures_from_activity():
    state = Flags(last_activity=NOW - timedelta(hours=2), resume_pending=True)
    assert route_decision(state, now=NOW, policy=IDLE) == "resume_pending_expired"
    fresh = Flags(last_activity=NOW - timedelta(minutes=10), resume_pending=True)
    assert route_decision(fresh, now=NOW, policy=IDLE) is None


def test_route_stale_marker_ignored_when_not_pending():
    state = Flags(last_activity=RECENT, resume_pending=False, resume_marked_at=THREE_DAYS_AGO)
    assert route_decision(state, now=NOW, policy=IDLE) is None


def test_route_background_process_blocks_a_timer_reset():
    assert route_decision(Flags(last_activity=STALE), now=NOW, policy=IDLE, background=lambda: True) is None


def test_route_rejects_naive_datetimes():
    naive = datetime(2026, 11, 29, 11, 0)
    with pytest.raises(ValueError, match="now"):
        route_decision(Flags(last_activity=RECENT), now=naive, policy=IDLE)
    with pytest.raises(ValueError, match="last_activity"):
        route_decision(Flags(last_activity=naive), now=NOW, policy=IDLE)
    with pytest.raises(ValueError, match="resume_marked_at"):
        route_decision(
            Flags(last_activity=RECENT, resume_pending=True, resume_marked_at=naive),
            now=NOW,
            policy=IDLE,
        )


def test_route_rejects_a_nan_window():
    with pytest.raises(ValueError, match="freshness_window_s"):
        route_decision(Flags(last_activity=RECENT), now=NOW, policy=IDLE, freshness_window_s=float("nan"))


# --- freshness window from the environment -----------------------------------------


# --- end reasons -------------------------------------------------------------------


def test_end_reasons():
    assert END_REASONS == {
        "idle",
        "daily",
        "suspended",
        "resume_pending_expired",
        "session_reset",
        "session_switch",
        "compression",
    }


# --- notices -----------------------------------------------------------------------


@pytest.mark.parametrize("reason", ["suspended", "resume_pending_expired"])
def test_notice_always_sent_for_resets_the_user_did_not_cause(reason):
    quiet = ResetPolicy(notify=False)
    text = reset_notice(reason, policy=quiet, platform="webhook", had_activity=False)
    assert text is not None
    assert "/resume" in text


def test_suspended_notice_states_the_reason():
    text = reset_notice("suspended", policy=ResetPolicy(), platform="telegram", had_activity=True)
    assert "the session was suspended" in text


def test_expired_notice_states_the_reason():
    text = reset_notice("resume_pending_expired", policy=ResetPolicy(), platform="telegram", had_activity=True)
    assert "the interrupted session expired" in text


def test_idle_notice_states_the_idle_time():
    text = reset_notice("idle", policy=ResetPolicy(), platform="telegram", had_activity=True)
    assert "inactive for 24h" in text
    assert "/resume" in text


@pytest.mark.parametrize("minutes, shown", [(60, "1h"), (90, "1h 30m"), (45, "45m"), (2880, "48h")])
def test_idle_notice_formats_other_durations(minutes, shown):
    policy = ResetPolicy(idle_minutes=minutes)
    text = reset_notice("idle", policy=policy, platform="telegram", had_activity=True)
    assert f"inactive for {shown}." in text


def test_daily_notice_states_the_schedule():
    text = reset_notice("daily", policy=ResetPolicy(), platform="telegram", had_activity=True)
    assert "daily schedule at 4:00" in text
    assert "/resume" in text


def test_daily_notice_names_the_zone():
    policy = ResetPolicy(at_hour=16, timezone="Asia/Shanghai")
    text = reset_notice("daily", policy=policy, platform="telegram", had_activity=True)
    assert "daily schedule at 16:00 (Asia/Shanghai)" in text


@pytest.mark.parametrize("reason", ["idle", "daily"])
def test_timer_notice_needs_notify_activity_and_an_included_platform(reason):
    policy = ResetPolicy()
    assert reset_notice(reason, policy=policy, platform="telegram", had_activity=True)
    assert reset_notice(reason, policy=policy, platform="telegram", had_activity=False) is None
    assert reset_notice(reason, policy=ResetPolicy(notify=False), platform="telegram", had_activity=True) is None
    assert reset_notice(reason, policy=policy, platform="api_server", had_activity=True) is None
    assert reset_notice(reason, policy=policy, platform="webhook", had_activity=True) is None


def test_timer_notice_honours_a_custom_exclusion_list():
    policy = ResetPolicy(notify_exclude_platforms=("telegram",))
    assert reset_notice("idle", policy=policy, platform="telegram", had_activity=True) is None
    assert reset_notice("idle", policy=policy, platform="webhook", had_activity=True) is not None


def test_timer_notice_accepts_enum_platforms():
    policy = ResetPolicy(notify_exclude_platforms=("telegram",))
    assert reset_notice("idle", policy=policy, platform=Platform.TELEGRAM, had_activity=True) is None
    assert reset_notice("idle", policy=policy, platform=Platform.SLACK, had_activity=True) is not None


@pytest.mark.parametrize("reason", ["session_reset", "compression", "bored"])
def test_notice_rejects_reasons_that_are_not_automatic_resets(reason):
    with pytest.raises(ValueError, match=reason):
        reset_notice(reason, policy=ResetPolicy(), platform="telegram", had_activity=True)


def test_explicit_reset_notice_follows_notify_and_the_exclusion_list():
    text = explicit_reset_notice("telegram", ResetPolicy())
    assert text is not None
    assert "next message" in text
    assert explicit_reset_notice("telegram", ResetPolicy(notify=False)) is None
    assert explicit_reset_notice("api_server", ResetPolicy()) is None
    assert explicit_reset_notice("webhook", ResetPolicy()) is None


def test_explicit_reset_notice_differs_from_the_auto_reset_notice():
    explicit = explicit_reset_notice("telegram", ResetPolicy())
    idle = reset_notice("idle", policy=ResetPolicy(), platform="telegram", had_activity=True)
    assert "inactive" not in explicit
    assert explicit != idle
