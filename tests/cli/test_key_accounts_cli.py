"""`turnlog key --account-id` and `turnlog route --account-id`: the bot account a message arrived on is
part of the key when given (docs/behaviour.md §2.8)."""

from __future__ import annotations

import json

from harness.cli import ok, run

WECHAT_USER = ["--platform", "weixin", "--chat-id", "wxid_u1", "--user-id", "wxid_u1"]


def test_key_shows_the_account_in_the_key_and_nothing_without_one(tmp_path):
    with_account = json.loads(ok("key", *WECHAT_USER, "--account-id", "bot_a", "--json").stdout)
    without = ok("key", *WECHAT_USER)

    assert (with_account["session_key"], with_account["shared"]) == ("agent:main:weixin:dm:bot_a:wxid_u1", False)
    assert without.output.splitlines() == ["agent:main:weixin:dm:wxid_u1", "shared: no"]


def test_route_gives_each_account_a_session_of_its_own(tmp_path):
    db = str(tmp_path / "t.db")
    routed = [json.loads(ok("--db", db, "route", *WECHAT_USER, "--account-id", account, "--json").stdout)
              for account in ("bot_a", "bot_b")]

    assert [r["session_key"] for r in routed] == ["agent:main:weixin:dm:bot_a:wxid_u1",
                                                  "agent:main:weixin:dm:bot_b:wxid_u1"]
    assert routed[0]["session_id"] != routed[1]["session_id"]


def test_a_bad_account_id_is_a_one_line_usage_error():
    result = run("key", *WECHAT_USER, "--account-id", "bot\x07")

    assert result.exit_code == 2 and "Traceback" not in result.output
    assert [line for line in result.output.splitlines() if line.startswith("Error")] == [
        "Error: Invalid value for source: account_id holds a control character: 'bot\\x07'"]
