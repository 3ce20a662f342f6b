"""Boot liveness (issue 12, item 2): each running boot holds a heartbeat renewed by its lease
keeper; start_gateway, recover and the ledger sweep treat another boot as dead only once its
heartbeat expired (docs/behaviour.md §6.2: only dead owners' rows are reclaimed) — across hosts, and with the
log in PostgreSQL too. On the boot's own host a process that is gone is dead at once."""

from __future__ import annotations

import itertools
import time

import pytest

from harness import procs
from postgres_server import create_database, server
from turnlog import EngineConfig, GatewayStillRunning, Turnlog

pytestmark = pytest.mark.takes_seconds(22)

PREFIX = "♻️ Recovered reply"
# The other host's heartbeat TTL. Its keeper renews it once a third has passed, so a child starved of
# CPU for two thirds of it looks dead: 5 s (it was 1 s) survives two busy cores and a loaded SQLite.
HEARTBEAT_TTL_S = 5.0

IN_SENDER = """
from turnlog import SessionSource
src = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", message_id="m1")
t = kit.turnlog()
t.start_gateway("east")
def send(text):
    kit.ready(boot=t.owner)
    kit.hang()
t.handle_message(src, "what is the answer?", lambda history, item: "the answer is 42", send)
"""


def test_a_second_gateways_sweep_never_claims_a_row_a_live_gateway_is_sending(tmp_path):
    db = str(tmp_path / "t.db")
    live = procs.start(db, IN_SENDER)
    try:
        data = procs.wait_for(tmp_path / "ready.json", live)
        with Turnlog(db) as west:
            west.start_gateway("west")
            [row] = west.ledger()
            assert (row.state, row.owner) == ("attempting", data["boot"])
            swept = west.sweep_deliveries(lambda target, text: pytest.fail("claimed a live gateway's row"))
            assert swept.delivered == [] and swept.skipped == [row.delivery_id]
            assert west.ledger()[0].attempts == 1
    finally:
        live.kill()
        live.communicate()  # waits, and closes its pipes
    sent = []
    with Turnlog(db) as west:  # its process is gone from this host: dead at once
        swept = west.sweep_deliveries(lambda target, text: sent.append(text))
        assert len(swept.delivered) == 1 and sent[0].startswith(PREFIX)


OTHER_HOST = """
import socket
socket.gethostname = lambda: "gateway-host-b"   # this child plays a gateway on another machine
from turnlog import EngineConfig, SessionSource
src = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", message_id="m1")
t = kit.turnlog(config=EngineConfig(heartbeat_ttl_s=HEARTBEAT_TTL_S), **LOCATION)
t.start_gateway("main")
def think(history, item):
    kit.ready(boot=t.owner, session_id=history[-1].session_id)
    kit.hang()
t.handle_message(src, "please look into the build", think, print)
"""


def _other_host_boot_is_recovered_only_after_its_heartbeat_expired(location: str, views: dict, tmp_path) -> None:
    code = OTHER_HOST.replace("**LOCATION", ", ".join(f"{k}={v!r}" for k, v in views["child"].items()) or "")
    code = code.replace("HEARTBEAT_TTL_S", repr(HEARTBEAT_TTL_S))
    child = procs.start(location, code, work=tmp_path)
    try:
        data = procs.wait_for(tmp_path / "ready.json", child)
        with Turnlog(location, **views["parent"]) as t:
            time.sleep(1.2 * HEARTBEAT_TTL_S)  # past the heartbeat's TTL: only its renewals keep the boot alive
            with pytest.raises(GatewayStillRunning, match="on gateway-host-b"):
                t.recover("main")
            with pytest.raises(GatewayStillRunning):
                t.start_gateway("main")
            assert [a.owner for a in t.status("main").active_turns] == [data["boot"]]
    finally:
        child.kill()
        child.communicate()  # waits, and closes its pipes
    with Turnlog(location, **views["parent"]) as t:
        deadline = time.monotonic() + 30 * HEARTBEAT_TTL_S
        while True:  # the dead host's heartbeat expires within its TTL
            try:
                report = t.recover("main")
                break
            except GatewayStillRunning:
                assert time.monotonic() < deadline, "the heartbeat never expired"
                time.sleep(0.1)
        assert report.recovered_boots == [data["boot"]]
        assert [(x.session_id, x.action) for x in report.interrupted] == [(data["session_id"], "resume_pending")]
        beats = [h for h in t.history(data["session_id"])]  # the heartbeat is not a session's event
        assert not [h for h in beats if h.event.startswith("Heartbeat")]


def test_a_boot_on_another_host_is_alive_while_its_heartbeat_is_renewed(tmp_path):
    db = str(tmp_path / "t.db")
    _other_host_boot_is_recovered_only_after_its_heartbeat_expired(db, {"child": {}, "parent": {}}, tmp_path)


_names = itertools.count()


@pytest.fixture(scope="module")
def pg():
    with server() as prefix:
        yield prefix


def test_a_boot_on_another_host_is_alive_while_its_heartbeat_is_renewed_postgres(pg, tmp_path):
    url = create_database(pg, f"turnlog_live_{next(_names)}")
    views = {"child": {"views": str(tmp_path / "child.db")}, "parent": {"views": str(tmp_path / "parent.db")}}
    _other_host_boot_is_recovered_only_after_its_heartbeat_expired(url, views, tmp_path)
