"""Issue 11 item 13: sweep_deliveries takes send(target, text); a sender of another shape is refused up
front with a clear InvalidRequest instead of making every redelivery fail quietly."""

from __future__ import annotations

import pytest

from turnlog import InvalidRequest, ManualClock, SequentialIds, Turnlog

from chat import alice


def failing_send(text):
    raise ConnectionError("platform down")


@pytest.fixture
def owed(tmp_path):
    """A database whose ledger owes one reply (its first delivery attempt failed)."""
    db = str(tmp_path / "t.db")
    with Turnlog(db, clock=ManualClock(), session_ids=SequentialIds()) as t:
        t.handle_message(alice(), "hello", lambda h, i: "hi alice", failing_send)
        assert [d.state for d in t.ledger()] == ["failed"]
    return db


def test_a_one_argument_sender_is_refused_before_anything_is_attempted(owed):
    sent = []

    def send_to_platform(text):  # the README's old example
        sent.append(text)

    with Turnlog(owed, clock=ManualClock(), session_ids=SequentialIds()) as t:
        with pytest.raises(InvalidRequest, match=r"sweep_deliveries calls send\(target, text\); the sender"
                                                 r" .*send_to_platform\(text\) cannot take that"):
            t.sweep_deliveries(send_to_platform)
        assert [(d.state, d.attempts) for d in t.ledger()] == [("failed", 1)]  # untouched

        with pytest.raises(InvalidRequest, match="needs a sender"):
            t.sweep_deliveries("not a function")

        report = t.sweep_deliveries(lambda target, text: sent.append((target["chat_id"], text)))
        assert len(report.delivered) == 1 and sent == [("42", sent[0][1])] and sent[0][1].endswith("hi alice")


def test_the_readme_example_uses_a_two_argument_sender():
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "t.sweep_deliveries(send_to_platform)" not in readme
    assert "send_to_target(target, text)" in readme
