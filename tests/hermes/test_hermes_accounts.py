"""Bot accounts across a Hermes home: Hermes 0.19.0 keys have no account (docs/behaviour.md §2.8), so
export-hermes writes keys without it and an import moves an origin naming its account back to the
account's key (§12.1 rule 1)."""

from __future__ import annotations

import json
from pathlib import Path

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog


def engine(path: Path) -> Turnlog:
    return Turnlog(str(path), clock=ManualClock("2026-12-01T00:00:00+00:00"), session_ids=SequentialIds())


def wechat(account: str, message_id: str) -> SessionSource:
    return SessionSource(platform="weixin", chat_id="wxid_u1", user_id="wxid_u1", account_id=account,
                         message_id=message_id)


def test_an_account_key_goes_out_as_hermes_key_and_comes_back_to_the_account(tmp_path) -> None:
    with engine(tmp_path / "a.db") as t:
        first, = t.handle_message(wechat("bot_a", "m1"), "hello a", lambda history, item: "hi from a",
                                  lambda text: None)
        t.handle_message(wechat("bot_b", "m2"), "hello b", lambda history, item: "hi from b", lambda text: None)

        report = t.export_hermes(tmp_path / "home")

    routing = json.loads((tmp_path / "home" / "sessions" / "sessions.json").read_text())
    assert [key for key in routing if not key.startswith("_")] == ["agent:main:weixin:dm:wxid_u1"]  # Hermes: both
    assert routing["agent:main:weixin:dm:wxid_u1"]["origin"]["account_id"] == "bot_a"
    assert [s["what"] for s in report.skipped] == ["routing key agent:main:weixin:dm:bot_b:wxid_u1"]
    assert "no bot account" in report.skipped[0]["reason"]

    with engine(tmp_path / "b.db") as again:
        imported = again.import_hermes(tmp_path / "home")
        assert imported.routes_rekeyed == [{
            "hermes_key": "agent:main:weixin:dm:wxid_u1", "session_key": "agent:main:weixin:dm:bot_a:wxid_u1",
            "session_id": first.session_id, "rule": "bot account in the key (spec §12)"}]
        assert again.get_or_create_session(wechat("bot_a", "m3")).session_id == first.session_id
