"""Logging through the standard `logging` module, as JSON lines when asked (turnlog.logs)."""

from __future__ import annotations

import io
import json
import logging

import pytest

from turnlog.logs import LOGGER, configure

from chat import alice, echo


@pytest.fixture
def captured():
    stream = io.StringIO()
    handler = configure(json=True, stream=stream)
    yield stream
    logging.getLogger(LOGGER).removeHandler(handler)


def refuse(text):
    raise ConnectionRefusedError("platform down")


def test_a_failed_send_is_one_json_line_with_its_fields(t, captured):
    t.handle_message(alice("m1"), "hi", echo, refuse)
    [line] = [json.loads(x) for x in captured.getvalue().splitlines()]
    assert line["logger"] == "turnlog.delivery" and line["level"] == "warning"
    assert line["session_id"] == t.session(alice()).session_id and line["unknown"] is False
    assert "ConnectionRefusedError: platform down" in line["message"] and line["owner"] == "gateway-a"


def test_a_failed_turn_is_logged_and_the_environment_chooses_json(t, monkeypatch):
    monkeypatch.setenv("TURNLOG_LOG_JSON", "1")
    stream = io.StringIO()
    handler = configure(stream=stream)
    try:
        with pytest.raises(RuntimeError):
            t.handle_message(alice("m1"), "hi", lambda history, item: (_ for _ in ()).throw(RuntimeError("agent")),
                             lambda text: None)
    finally:
        logging.getLogger(LOGGER).removeHandler(handler)
    [line] = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert line["logger"] == "turnlog.turn" and "RuntimeError: agent" in line["message"] and line["turn_id"]


def test_plain_lines_by_default_and_a_second_configure_replaces_the_first(t):
    first, second = io.StringIO(), io.StringIO()
    configure(json=False, stream=first)
    handler = configure(json=False, stream=second)
    try:
        t.handle_message(alice("m1"), "hi", echo, refuse)
    finally:
        logging.getLogger(LOGGER).removeHandler(handler)
    assert first.getvalue() == "" and " WARNING turnlog.delivery: send of delivery " in second.getvalue()
