import pytest

from turnlog.domain.silence import SILENCE_NOTICE, is_silence_marker, outbound_for_reply

MARKERS = [
    "[SILENT]",
    "silent",
    ".NO_REPLY",
    "*NO_REPLY*",
    "  NO   REPLY ",
    "「NO_REPLY」",
    "NO_REPLY",
    "no reply",
    "SILENT.",
    "\nNO_REPLY\n",
    "**[SILENT]**",
]

NOT_MARKERS = [
    "[SILENT",
    "SILENT]",
    "NO_REPLY please",
    "Use NO_REPLY when nothing is needed.",
    "",
    "   ",
    "x" * 70,
    "NOREPLY",
    "SILENCE",
    None,
]


@pytest.mark.parametrize("text", MARKERS)
def test_silence_markers(text):
    assert is_silence_marker(text)


@pytest.mark.parametrize("text", NOT_MARKERS)
def test_not_silence_markers(text):
    assert not is_silence_marker(text)


def test_length_cap_applies_to_the_trimmed_text():
    # 64 characters after trimming is still checked; padding does not count.
    padded = " " * 100 + "NO_REPLY" + " " * 100
    assert is_silence_marker(padded)
    assert not is_silence_marker("." * 57 + "NO_REPLY")  # 65 characters
    assert is_silence_marker("." * 56 + "NO_REPLY")  # 64 characters


@pytest.mark.parametrize("text", MARKERS)
def test_marker_on_a_human_turn_becomes_the_notice(text):
    assert outbound_for_reply(text, internal=False) == SILENCE_NOTICE


@pytest.mark.parametrize("text", MARKERS)
def test_marker_on_an_internal_turn_sends_nothing(text):
    assert outbound_for_reply(text, internal=True) is None


def test_the_notice_says_what_happened():
    assert "returned only a silence marker" in SILENCE_NOTICE


@pytest.mark.parametrize("internal", [True, False])
@pytest.mark.parametrize("text", [None, "", "  \n "])
def test_empty_reply_sends_nothing(text, internal):
    assert outbound_for_reply(text, internal=internal) is None


@pytest.mark.parametrize("internal", [True, False])
def test_real_reply_is_sent_unchanged(internal):
    text = "  Done — the build is green.\n"
    assert outbound_for_reply(text, internal=internal) == text


@pytest.mark.parametrize("internal", [True, False])
def test_reply_mentioning_a_marker_is_sent(internal):
    text = "NO_REPLY please"
    assert outbound_for_reply(text, internal=internal) == text
