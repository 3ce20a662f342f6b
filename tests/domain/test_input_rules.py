"""Issue 11 item 10: ids are refused with InvalidRequest when they hold NUL or other control characters,
are whitespace only, are longer than MAX_ID_LENGTH (1,024), or are empty where the engine needs one;
an error quotes at most 80 characters of the bad value."""

from __future__ import annotations

import pytest

from turnlog import InvalidRequest, ManualClock, SequentialIds, SessionSource, Turnlog
from harness.cli import run
from turnlog.domain.source import MAX_ID_LENGTH, QUOTE_LIMIT

BAD_IDS = {
    "NUL": "42\x00",
    "escape": "\x1b]0;pwned\x07",
    "newline": "42\nforged line",
    "DEL": "4\x7f2",
    "C1": "42\x9b2J",
    "blank": "   ",
    "tab only": "\t",
    "too long": "7" * (MAX_ID_LENGTH + 1),
}


@pytest.mark.parametrize("field", ["chat_id", "user_id", "user_id_alt", "thread_id", "scope_id", "message_id"])
@pytest.mark.parametrize("kind", BAD_IDS)
def test_a_bad_id_is_refused_with_invalid_request(field, kind):
    fields = {"platform": "telegram", "chat_id": "42", field: BAD_IDS[kind]}
    with pytest.raises(InvalidRequest, match=field) as refused:
        SessionSource(**fields)
    assert len(str(refused.value)) < 200  # the value is quoted, cut to QUOTE_LIMIT characters


def test_an_id_at_the_cap_is_accepted_and_a_mutation_is_checked_too():
    source = SessionSource(platform="telegram", chat_id="7" * MAX_ID_LENGTH, user_id="42")
    assert len(source.chat_id) == MAX_ID_LENGTH
    with pytest.raises(InvalidRequest, match="user_id holds a control character"):
        source.user_id = "4\x002"
    assert source.user_id == "42"


def test_errors_quote_at_most_80_characters_of_a_bad_value():
    huge = "x" * 100_000
    for make in (lambda: SessionSource(platform="telegram", chat_id=huge + "\x00"),
                 lambda: SessionSource(platform=huge, chat_id="1")):
        with pytest.raises(InvalidRequest) as refused:
            make()
        message = str(refused.value)
        assert "x" * QUOTE_LIMIT in message and "x" * (QUOTE_LIMIT + 1) not in message
        assert len(message) < 600


def test_the_engine_refuses_a_source_that_names_no_conversation(tmp_path):
    with Turnlog(str(tmp_path / "t.db"), clock=ManualClock(), session_ids=SequentialIds()) as t:
        with pytest.raises(InvalidRequest, match="DM needs a chat_id or a user_id"):
            t.get_or_create_session(SessionSource(platform="signal", chat_id=""))
        with pytest.raises(InvalidRequest, match="group message needs a chat_id"):
            t.get_or_create_session(SessionSource(platform="telegram", chat_type="group", chat_id="", user_id="42"))
        with pytest.raises(InvalidRequest, match="DM needs a chat_id"):
            t.handle_message(SessionSource(platform="signal", chat_id=""), "hi", lambda h, i: "x", lambda s: None)
        assert t.sessions() == [] and t.routes() == []
        # A DM known by its sender alone is fine (docs/behaviour.md §2.2: signal DMs carry no chat id).
        assert t.get_or_create_session(SessionSource(platform="signal", chat_id="", user_id="+1555")).created


@pytest.mark.parametrize("args, mentions", [
    (["--chat-id", "\x1b]0;pwned\x07"], "chat_id holds a control character"),
    (["--chat-id", "42", "--user-id", " "], "user_id is only whitespace"),
    (["--chat-id", "9" * 5000], "chat_id is 5000 characters long (at most 1024)"),
    (["--chat-type", "group", "--user-id", "42"], "group message needs a chat_id"),
])
def test_the_cli_refuses_a_bad_id_in_one_line(tmp_path, args, mentions):
    db = str(tmp_path / "t.db")
    result = run("--db", db, "route", "--platform", "telegram", *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "\x1b" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and mentions in errors[0] and len(errors[0]) < 300
