"""A gateway boot that is alive in another process is neither recovered nor replaced: starting the
same gateway, or recovering it, is refused with one line naming the live boot; once that process
is killed, the next start recovers its running turn."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from harness import procs
from turnlog import GatewayStillRunning, SessionSource, Turnlog
from turnlog.cli import main

CHILD = """
from turnlog import SessionSource
t = kit.turnlog(owner="first")
t.start_gateway("main")
source = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42")
session_id = t.get_or_create_session(source).session_id
t.turns.acquire_lease(session_id, t.routing_key(source), timeout=5)  # a turn in progress
kit.ready(session_id=session_id)
kit.hang()
"""


def test_a_live_boot_is_not_replaced_or_recovered_until_its_process_is_gone(tmp_path):
    db = str(tmp_path / "t.db")
    child = procs.start(db, CHILD)
    try:
        session_id = procs.wait_for(tmp_path / "ready.json", child)["session_id"]
        with Turnlog(db, owner="second") as t:
            with pytest.raises(GatewayStillRunning, match=f"still running \\(pid {child.pid}\\)"):
                t.start_gateway("main")
            with pytest.raises(GatewayStillRunning):
                t.recover("main")
            assert t.status("main").last_boot.boot_id == "first"  # no boot was recorded
            assert [a.owner for a in t.status("main").active_turns] == ["first"]
        result = CliRunner().invoke(main, ["--db", db, "recover"])
        assert result.exit_code == 1 and "still running" in result.output and "Traceback" not in result.output
    finally:
        child.kill()
        child.communicate()  # waits, and closes its pipes

    with Turnlog(db, owner="third") as t:
        report = t.start_gateway("main")
        assert (report.previous_boot_id, report.previous_clean) == ("first", False)
        assert report.recovery.recovered_boots == ["first"]
        assert [(turn.session_id, turn.action) for turn in report.recovery.interrupted] == \
            [(session_id, "resume_pending")]


def test_the_same_process_may_start_its_gateway_again(tmp_path):
    db = str(tmp_path / "t.db")
    source = SessionSource(platform="telegram", chat_type="dm", chat_id="7", user_id="7")
    with Turnlog(db, owner="one") as first:
        first.start_gateway("main")
        first.handle_message(source, "hi", lambda h, i: "hello", lambda text: None)
    with Turnlog(db, owner="two") as again:  # this process replacing its own earlier boot
        report = again.start_gateway("main")
    assert report.previous_boot_id == "one" and report.recovery.recovered_boots == ["one"]
