"""/undo, /retry and in-place compaction made in a test through the public API (`t.undo`,
`t.command(source, "/retry")`, `t.compact`), and a log made of the Hermes fixture (imported by the
caller) with such edits on sessions of both kinds."""

from __future__ import annotations

from typing import Any

from turnlog import SessionSource, Turnlog

FEISHU, WEIXIN, TG_DM_2 = "20261107_100001_5330a25f", "20261118_190001_079d16b1", "20261105_210210_ae4d6fdf"
TG_DM = SessionSource(platform="telegram", chat_type="dm", chat_id="5512345678", user_id="5512345678")
CAROL = SessionSource(platform="telegram", chat_type="dm", chat_id="777", user_id="777", user_name="carol")
DAVE = SessionSource(platform="slack", chat_type="group", chat_id="C9", user_id="U9", scope_id="T9", thread_id="1.5")


def undo(t: Turnlog, session_id: str, turns: int = 1) -> None:
    t.undo(session_id, turns, actor="test", cause="test:undo")


def retry(t: Turnlog, source: SessionSource) -> None:
    """/retry: the last turn leaves the history and its text runs again as a new turn."""
    assert t.command(source, "/retry").turn_pending
    t.run_next(source, lambda history, item: f"again: {item.text}", lambda *a: None)
    t._clock.advance(60)


def compact(t: Turnlog, session_id: str, keep_turns: int = 0, focus: str | None = None) -> None:
    t.compact(session_id, keep_turns=keep_turns, focus=focus, actor="test")


def tool_turn(word: str) -> Any:
    call = {"id": f"call_{word}", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
    return lambda history, item: [
        {"role": "assistant", "content": "", "tool_calls": [call], "finish_reason": "tool_calls"},
        {"role": "tool", "content": f"found {word}", "tool_call_id": call["id"], "name": "lookup"},
        {"role": "assistant", "content": f"answer about {item.text}", "finish_reason": "stop"}]


def say(t: Turnlog, source: SessionSource, text: str, responder: Any = None) -> str:
    [outcome] = t.handle_message(source, text, responder or (lambda history, item: f"re: {item.text}"),
                                 lambda *a: None)
    t._clock.advance(60)
    return outcome.session_id


def edited_in_turnlog(t: Turnlog) -> dict[str, list[str]]:
    """Sessions born in turnlog and imported ones, edited in turnlog; the words only compacted
    (searchable) and only undone (hidden) text holds."""
    carol = say(t, CAROL, "tell me about the aardvark")
    say(t, CAROL, "and the bison", tool_turn("bisonfact"))
    say(t, CAROL, "what of the capybara")
    undo(t, carol)  # the capybara turn taken back
    say(t, CAROL, "rather the dugong")
    say(t, CAROL, "and the echidna")
    compact(t, carol, keep_turns=1)  # aardvark .. dugong summarised, echidna kept
    say(t, CAROL, "lastly the fossa")
    undo(t, carol)  # after the compaction
    dave = say(t, DAVE, "deploy the gryphon build")
    say(t, DAVE, "roll back the hydra build")
    compact(t, dave)  # everything: the summary alone, then a turn
    say(t, DAVE, "status of the ibex build", lambda history, item: "ibex answer lemming")
    retry(t, DAVE)  # the lemming answer taken back, the question answered again
    say(t, TG_DM, "one more about jackalope")  # an imported live session
    say(t, TG_DM, "and kinkajou", tool_turn("kinkajoufact"))
    undo(t, TG_DM_2)
    compact(t, TG_DM_2, keep_turns=1)
    compact(t, FEISHU, keep_turns=1)  # over Hermes' own compaction
    return {"compacted": ["aardvark", "bisonfact", "gryphon", "jackalope", "短信服务商"],
            "undone": ["capybara", "fossa", "kinkajoufact", "lemming", "再短一点"]}
