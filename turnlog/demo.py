"""`turnlog demo`: a scripted multi-platform scenario, so a newcomer sees the engine work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

from .api import Turnlog
from .clock import ManualClock
from .config import EngineConfig
from .domain.policy import ResetPolicies, ResetPolicy
from .domain.source import SessionSource

Echo = Callable[[str], None]


def run_demo(db: str, echo: Echo, table: Callable[[list[dict[str, Any]], list[str]], None]) -> None:
    clock = ManualClock(datetime.now(timezone.utc).replace(microsecond=0))
    config = EngineConfig(reset=ResetPolicies(default=ResetPolicy(mode="idle", idle_minutes=1440)))
    alice_dm = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", user_name="alice")
    with Turnlog(db, config=config, clock=clock) as t:
        echo(f"database: {db}\n")
        steps: list[tuple[str, SessionSource]] = [
            ("alice writes to the bot on Telegram", alice_dm),
            ("alice and bob talk in a Telegram group (one session each)",
             SessionSource(platform="telegram", chat_type="group", chat_id="-100123", user_id="42")),
            ("", SessionSource(platform="telegram", chat_type="group", chat_id="-100123", user_id="77")),
            ("a Discord thread is shared by everyone in it",
             SessionSource(platform="discord", chat_type="thread", chat_id="555", thread_id="888", user_id="42",
                           scope_id="G1")),
            ("", SessionSource(platform="discord", chat_type="thread", chat_id="555", thread_id="888", user_id="77",
                               scope_id="G1")),
            ("the same Slack channel id in two workspaces gets two sessions",
             SessionSource(platform="slack", chat_type="channel", chat_id="C123", user_id="U9", scope_id="T1")),
            ("", SessionSource(platform="slack", chat_type="channel", chat_id="C123", user_id="U9", scope_id="T2")),
            ("one WhatsApp number written two ways is one session",
             SessionSource(platform="whatsapp", chat_type="dm", chat_id="+1 555 123 4567")),
            ("", SessionSource(platform="whatsapp", chat_type="dm", chat_id="15551234567@s.whatsapp.net")),
            ("a Feishu group keys on the stable union id",
             SessionSource(platform="feishu", chat_type="group", chat_id="oc_1", user_id="ou_1",
                           user_id_alt="on_union")),
        ]
        for title, source in steps:
            if title:
                echo(f"# {title}")
            _route(t, source, echo)
        echo("\n# alice is away for 25 hours; the idle policy (24 h) gives her a new session")
        first = t.get_or_create_session(alice_dm).session_id
        clock.advance(hours=25)
        _route(t, alice_dm, echo)
        echo("# an operator suspends it; her next message starts another")
        t.suspend(alice_dm, "operator", actor="cli:demo", cause="demo:suspend")
        clock.advance(minutes=1)
        _route(t, alice_dm, echo)
        echo("# she resumes her first conversation (/resume)")
        t.switch_session(alice_dm, first, actor="telegram:user:42", cause="command:/resume")
        _route(t, alice_dm, echo)

        echo("\nRouting map (a projection of the log):")
        table([r.to_dict() for r in t.routes()], ["session_key", "session_id", "bound_reason"])
        echo(f"\nHistory of {t.routing_key(alice_dm)}:")
        rows = [e.to_dict() for e in t.history(alice_dm)]
        table(rows, ["position", "event", "actor", "cause", "session_id"])

    _turns_and_a_crash(db, echo, table)


def _responder(history: Sequence[Any], item: Any) -> str:
    return f"(agent) you said {item.text!r}; this session has {len(history)} messages so far"


def _turns_and_a_crash(db: str, echo: Echo, table: Callable[[list[dict[str, Any]], list[str]], None]) -> None:
    bob = SessionSource(platform="discord", chat_type="dm", chat_id="77", user_id="77", user_name="bob")
    sent: list[str] = []
    with Turnlog(db) as t:
        echo("\n# turns: each takes the session's lease, appends to its transcript, records and delivers the reply")
        for n, text in enumerate(["hello", "what is turnlog?"], start=1):
            bob.message_id = f"d{n}"
            for outcome in t.handle_message(bob, text, _responder, sent.append):
                echo(f"  turn on {outcome.session_id}: lease epoch {outcome.epoch}, reply {outcome.delivery_state}")
        echo("# /queue: each queued message is its own turn, in order")
        for text in ("/queue first", "/queue second"):
            echo(f"  {text} -> {t.command(bob, text).reply}")
        while (queued := t.run_next(bob, _responder, sent.append)) is not None:
            echo(f"  queued item {queued.item_id} answered")

    echo("\n# a gateway process is killed with SIGKILL in the middle of a turn")
    ready = db + ".demo-ready"
    child = subprocess.Popen([sys.executable, "-c", _CRASHING_GATEWAY, db, ready])
    deadline = time.monotonic() + 30
    while not os.path.exists(ready) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    os.remove(ready)
    echo(f"  killed pid {child.pid} while it held the turn lease")

    with Turnlog(db) as t:
        boot = t.start_gateway("demo")
        echo(f"# the next boot reads the log: previous boot ended clean? {boot.previous_clean}")
        for turn in boot.recovery.interrupted:
            echo(f"  interrupted turn on {turn.session_id} (epoch {turn.epoch}): {turn.action}")
        swept = t.sweep_deliveries(lambda target, text: sent.append(text))
        echo(f"  ledger sweep: {len(swept.delivered)} owed replies delivered")
        for outcome in t.resume_interrupted(_responder, sent.append):
            echo(f"  resumed once on {outcome.session_id}: reply {outcome.delivery_state}")
        session_id = t.get_or_create_session(bob, touch_activity=False).session_id
        echo(f"\nTranscript of {session_id} (read from the log):")
        table(t.transcript(session_id), ["seq", "role", "epoch", "content"])
        t.stop_gateway()


_CRASHING_GATEWAY = """
import sys, time
from turnlog import SessionSource, Turnlog
db, ready = sys.argv[1], sys.argv[2]
t = Turnlog(db)
t.start_gateway("demo")
bob = SessionSource(platform="discord", chat_type="dm", chat_id="77", user_id="77", message_id="d9")
def think(history, item):
    with open(ready, "w") as f:
        f.write("holding the lease")
    time.sleep(60)
    return "never sent"
t.handle_message(bob, "this turn will be cut off", think, print)
"""


def _route(t: Turnlog, source: SessionSource, echo: Echo) -> None:
    r = t.get_or_create_session(source)
    what = f"new session ({r.reason})" if r.created else "same session"
    echo(f"  {r.session_key:<48} -> {r.session_id}  {what}")
