"""`turnlog demo`: a scripted multi-platform scenario, so a newcomer sees the engine work."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable

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
        table(t.routes(), ["session_key", "session_id", "bound_reason"])
        echo(f"\nHistory of {t.routing_key(alice_dm)}:")
        rows = [e.to_dict() for e in t.history(alice_dm)]
        table(rows, ["position", "event", "actor", "cause", "session_id"])


def _route(t: Turnlog, source: SessionSource, echo: Echo) -> None:
    r = t.get_or_create_session(source)
    what = f"new session ({r.reason})" if r.created else "same session"
    echo(f"  {r.session_key:<48} -> {r.session_id}  {what}")
