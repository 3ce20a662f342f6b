"""Rekey: changing group/thread_sessions_per_user without losing a session (docs/behaviour.md §18)."""

from __future__ import annotations

import warnings

import pytest

from turnlog import EngineConfig, InvalidRequest, KeySettings, KeySettingsIgnored, SessionSource
from tests.chat import collect, echo

GROUP = "-100500"


def in_group(user: str, message_id: str | None = None) -> SessionSource:
    return SessionSource(platform="telegram", chat_type="group", chat_id=GROUP, user_id=user, message_id=message_id)


def in_thread(user: str, message_id: str | None = None) -> SessionSource:
    return SessionSource(platform="discord", chat_type="thread", chat_id="C9", thread_id="T7", user_id=user,
                         scope_id="G1", message_id=message_id)


def say(t, source: SessionSource, text: str, clock) -> str:
    """Run one message through the gateway path; the session it ran in."""
    clock.advance(5)
    [outcome] = t.handle_message(source, text, echo, collect([]))
    return outcome.session_id


def sid(t, source: SessionSource) -> str:
    return t.get_or_create_session(source, touch_activity=False).session_id


def reachable(t, session_id: str) -> None:
    row = t.session(session_id)
    assert row.ended_at is None and session_id in {s.session_id for s in t.sessions()}


# -- per user -> shared ----------------------------------------------------------------------

def test_a_group_of_per_user_sessions_becomes_one_shared_key_on_the_most_recent(t, clock):
    alice = say(t, in_group("A", "m1"), "hi from alice", clock)
    bob = say(t, in_group("B", "m2"), "hi from bob", clock)
    assert alice != bob
    report = t.rekey(group_sessions_per_user=False, actor="ops", cause="ticket")
    shared = f"agent:main:telegram:group:{GROUP}"
    assert report.changed and not report.dry_run and report.position > 0
    assert [(m.old_key, m.new_key, m.session_id, m.reason) for m in report.moves] == [
        (f"{shared}:B", shared, bob, "rekey_per_user_to_shared")]
    assert [(k.old_key, k.session_id) for k in report.kept] == [(f"{shared}:A", alice)]
    assert t.key_settings() == KeySettings(group_sessions_per_user=False, thread_sessions_per_user=False)
    # A new message after the rekey routes by the new rule: anyone in the group shares Bob's session.
    assert say(t, in_group("C", "m3"), "hi from carol", clock) == bob
    assert t.routing_key(in_group("A")) == shared
    # Alice's session stays listed, shown and resumable by her.
    reachable(t, alice)
    assert t.command(in_group("A", "m4"), f"/resume {alice}").session_id == alice
    assert sid(t, in_group("C")) == alice


def test_a_thread_of_per_user_sessions_becomes_shared(make_turnlog, clock):
    t = make_turnlog(config=EngineConfig(thread_sessions_per_user=True))
    alice = say(t, in_thread("A", "m1"), "one", clock)
    bob = say(t, in_thread("B", "m2"), "two", clock)
    alice_again = say(t, in_thread("A", "m3"), "three", clock)
    assert alice_again == alice
    report = t.rekey(thread_sessions_per_user=False)
    thread = "agent:main:discord:thread:C9:T7"
    assert [(m.new_key, m.session_id) for m in report.moves] == [(thread, alice)]
    assert [k.session_id for k in report.kept] == [bob]
    assert say(t, in_thread("B", "m4"), "four", clock) == alice
    reachable(t, bob)


# -- shared -> per user ----------------------------------------------------------------------

def test_a_shared_group_gives_each_participant_a_key_on_the_shared_session(make_turnlog, clock):
    t = make_turnlog(config=EngineConfig(group_sessions_per_user=False))
    shared = say(t, in_group("A", "m1"), "hello", clock)
    assert say(t, in_group("B", "m2"), "hello too", clock) == shared
    report = t.rekey(group_sessions_per_user=True)
    key = f"agent:main:telegram:group:{GROUP}"
    assert [(m.old_key, m.new_key, m.session_id, m.reason, m.previous_session_id) for m in report.moves] == [
        (key, f"{key}:A", shared, "rekey_shared_to_per_user", None),
        (key, f"{key}:B", shared, "rekey_shared_to_per_user", None)]
    assert report.kept == ()
    # Both go on in the shared session; someone never seen gets their own.
    assert say(t, in_group("A", "m3"), "still here", clock) == shared
    assert say(t, in_group("B", "m4"), "me too", clock) == shared
    carol = say(t, in_group("C", "m5"), "new here", clock)
    assert carol != shared
    # /new from Alice splits her off; Bob stays in the shared session.
    t.command(in_group("A", "m6"), "/new")
    assert say(t, in_group("A", "m7"), "fresh start", clock) not in (shared, carol)
    assert sid(t, in_group("B")) == shared
    reachable(t, shared)
    # The shared session is still Alice's to go back to: her key has pointed at it.
    assert t.command(in_group("A", "m8"), f"/resume {shared}").session_id == shared
    # The transcript is whole: everything said before and after the rekey.
    texts = [m["content"] for m in t.transcript(shared) if m["role"] == "user"]
    assert texts == ["hello", "hello too", "still here", "me too"]


def test_a_shared_thread_gives_each_participant_a_key_on_the_shared_session(t, clock):
    shared = say(t, in_thread("A", "m1"), "one", clock)
    assert say(t, in_thread("B", "m2"), "two", clock) == shared
    report = t.rekey(thread_sessions_per_user=True)
    thread = "agent:main:discord:thread:C9:T7"
    assert {(m.new_key, m.session_id) for m in report.moves} == {(f"{thread}:A", shared), (f"{thread}:B", shared)}
    assert say(t, in_thread("B", "m3"), "three", clock) == shared
    assert say(t, in_thread("Z", "m4"), "four", clock) != shared


def test_a_round_trip_keeps_every_session_reachable(t, clock):
    alice = say(t, in_group("A", "m1"), "a", clock)
    bob = say(t, in_group("B", "m2"), "b", clock)
    t.rekey(group_sessions_per_user=False)
    assert say(t, in_group("A", "m3"), "a again", clock) == bob
    back = t.rekey(group_sessions_per_user=True)
    # Bob's session, where both spoke last, is now both of theirs; Alice's older one stays resumable.
    assert sid(t, in_group("A")) == bob and sid(t, in_group("B")) == bob
    assert [k.session_id for k in back.kept] == [alice]
    for session_id in (alice, bob):
        reachable(t, session_id)
    assert t.command(in_group("A", "m4"), f"/resume {alice}").session_id == alice


# -- dry run, time travel, the settings as part of the log -----------------------------------

def test_a_dry_run_writes_nothing_and_plans_the_same(t, clock):
    say(t, in_group("A", "m1"), "a", clock)
    say(t, in_group("B", "m2"), "b", clock)
    head = t.maintenance.log_head()
    dry = t.rekey(group_sessions_per_user=False, dry_run=True)
    assert t.maintenance.log_head() == head and dry.dry_run and dry.position == 0
    assert t.key_settings() == KeySettings()
    run = t.rekey(group_sessions_per_user=False)
    assert (dry.moves, dry.kept, dry.old, dry.new) == (run.moves, run.kept, run.old, run.new)
    assert t.maintenance.log_head() > head


def test_time_travel_before_the_rekey_shows_the_old_keys_and_settings(t, clock):
    say(t, in_group("A", "m1"), "a", clock)
    say(t, in_group("B", "m2"), "b", clock)
    before = t.maintenance.log_head()
    report = t.rekey(group_sessions_per_user=False)
    key = f"agent:main:telegram:group:{GROUP}"
    assert {r["session_key"] for r in t.at(before).routes()} == {f"{key}:A", f"{key}:B"}
    assert {r["session_key"] for r in t.at(report.position).routes()} == {f"{key}:A", f"{key}:B", key}
    assert t.at(before).key_settings() is None  # nothing recorded yet: the config's held
    assert t.at(report.position).key_settings()["new"] == {"group_sessions_per_user": False,
                                                           "thread_sessions_per_user": False}
    changed = t.diff(before, report.position)["keys"][key]
    assert changed == [{"change": "registered", "from_session": None, "to_session": report.moves[0].session_id,
                        "reason": "rekey_per_user_to_shared"}]


def test_the_logs_settings_hold_over_a_config_that_disagrees(make_turnlog, t, clock):
    bob = say(t, in_group("B", "m1"), "b", clock)
    t.rekey(group_sessions_per_user=False)
    with pytest.warns(KeySettingsIgnored, match="group_sessions_per_user=true is ignored"):
        explicit = make_turnlog(config=EngineConfig(group_sessions_per_user=True))
    assert explicit.key_settings().group_sessions_per_user is False
    assert sid(explicit, in_group("Q")) == bob
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agreeing = make_turnlog(config=EngineConfig(group_sessions_per_user=False))
        silent = make_turnlog()
    assert agreeing.key_settings() == silent.key_settings() == explicit.key_settings()


def test_another_process_routes_by_the_new_rule_from_its_next_heartbeat(t, other, clock):
    """Routing reads the settings from memory (no read per message): another open picks a rekey
    up at its gateway's next heartbeat, or when asked for the settings."""
    bob = say(t, in_group("B", "m1"), "b", clock)
    other.start_gateway("other")
    t.rekey(group_sessions_per_user=False)
    assert t.routing_key(in_group("R")) == f"agent:main:telegram:group:{GROUP}"  # the rekeying open: at once
    assert other.routing_key(in_group("R")) == f"agent:main:telegram:group:{GROUP}:R"  # not yet
    clock.advance(20)  # a third of the heartbeat's 60 s TTL: the heartbeat is due
    with pytest.warns(DeprecationWarning):
        keeper = other.keeper
    keeper.tick()
    assert other.routing_key(in_group("R")) == f"agent:main:telegram:group:{GROUP}"
    assert sid(other, in_group("R")) == bob


def test_asking_for_the_settings_reads_them_afresh(t, other, clock):
    say(t, in_group("B", "m1"), "b", clock)
    t.rekey(group_sessions_per_user=False)
    assert other.key_settings().group_sessions_per_user is False
    assert other.routing_key(in_group("R")) == f"agent:main:telegram:group:{GROUP}"


def test_the_settings_change_is_one_event_with_who_and_why(t, clock):
    say(t, in_group("A", "m1"), "a", clock)
    t.rekey(group_sessions_per_user=False, actor="cli", cause="operator asked")
    [event] = [e for e in t.events_around(t.maintenance.log_head(), before=2, after=0)
               if e.event == "KeySettingsChanged"]
    assert (event.actor, event.cause) == ("cli", "operator asked")
    assert event.summary == ("key settings group=per user, thread=shared -> group=shared, thread=shared,"
                             " 1 route(s) moved")


def test_a_rekey_to_the_settings_in_force_records_nothing(t, clock):
    say(t, in_group("A", "m1"), "a", clock)
    head = t.maintenance.log_head()
    report = t.rekey(group_sessions_per_user=True, thread_sessions_per_user=False)
    assert not report.changed and report.moves == () and t.maintenance.log_head() == head


def test_rekey_refuses_no_flags_and_values_that_are_not_booleans(t):
    with pytest.raises(InvalidRequest):
        t.rekey()
    with pytest.raises(InvalidRequest):
        t.rekey(group_sessions_per_user="no")  # type: ignore[arg-type]


def test_an_export_to_hermes_after_a_rekey_says_the_new_settings(t, clock, tmp_path):
    say(t, in_group("A", "m1"), "a", clock)
    t.rekey(group_sessions_per_user=False)
    t.export_hermes(tmp_path / "home")
    config = (tmp_path / "home" / "config.yaml").read_text()
    assert "group_sessions_per_user: false" in config and "thread_sessions_per_user: false" in config


def test_keys_the_settings_do_not_shape_stay_as_they_are(t, clock):
    dm = say(t, SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", message_id="m1"),
             "a dm", clock)
    group = say(t, in_group("A", "m2"), "a group", clock)
    report = t.rekey(group_sessions_per_user=False, thread_sessions_per_user=True)
    assert [m.session_id for m in report.moves] == [group] and report.kept == ()
    assert sid(t, SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42")) == dm
