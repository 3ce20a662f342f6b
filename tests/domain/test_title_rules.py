"""The title rules of domain/titles.py, with Hermes 0.19.0's own examples (hermes_state.SessionDB:
sanitize_title, get_next_title_in_lineage, and resolve_session_by_title where turnlog differs)."""

from __future__ import annotations

import pytest

from turnlog import InvalidRequest
from turnlog.domain.titles import MAX_TITLE_LENGTH, clean_title, lineage_base, named_by, next_in_lineage


@pytest.mark.parametrize("raw,cleaned", [
    (None, None), ("", None), ("   ", None), ("\u200b\ufeff", None),
    ("  my   session\n", "my session"), ("tab\there", "tab here"), ("bell\x07s", "bells"),
    ("rtl\u202eoverride", "rtloverride"), ("zero\u200bwidth", "zerowidth"), ("lone \ud800 half", "lone \ufffd half"),
    ("东京天气查询", "东京天气查询"), ("x" * MAX_TITLE_LENGTH, "x" * MAX_TITLE_LENGTH),
])
def test_clean_title(raw, cleaned):
    assert clean_title(raw) == cleaned


def test_a_title_over_100_characters_is_refused():
    with pytest.raises(InvalidRequest, match=r"Title too long \(101 chars, max 100\)"):
        clean_title("x" * 101)
    assert clean_title(" " + "x" * 100 + "  ") == "x" * 100  # counted once cleaned


@pytest.mark.parametrize("base,taken,expected", [
    ("my session", [], "my session"),
    ("my session", ["other"], "my session"),
    ("my session", ["my session"], "my session #2"),
    ("my session", ["my session", "my session #2"], "my session #3"),
    ("my session #2", ["my session", "my session #2"], "my session #3"),  # the base of a numbered title
    ("my session", ["my session #7"], "my session #8"),
    ("my session", ["my session", "my session #x", "my sessions"], "my session #2"),
    ("a_b%", ["a_b%", "aXb% #5"], "a_b% #2"),  # LIKE wildcards are text (Hermes escapes them)
])
def test_next_in_lineage(base, taken, expected):
    assert next_in_lineage(base, taken) == expected


def test_lineage_base():
    assert (lineage_base("plan #12"), lineage_base("plan"), lineage_base("#3")) == ("plan", "plan", "#3")


def test_named_by_prefers_the_exact_title_then_the_newest_of_the_lineage():
    newest_first = [("s4", "plan #3"), ("s3", "other"), ("s2", "plan #2"), ("s1", "plan")]

    assert named_by("plan", newest_first) == "s1"  # Hermes would answer s4
    assert named_by("plan", newest_first[:3]) == "s4"
    assert named_by("plan #2", newest_first) == "s2"
    assert named_by("nothing", newest_first) is None
