"""Session titles: how a title is cleaned, and the next free one in a lineage ("branch", "branch #2").

Hermes 0.19.0's rules (hermes_state.SessionDB.sanitize_title, get_next_title_in_lineage): control
and invisible formatting characters go, whitespace runs become one space, an empty result means
"no title", and more than 100 characters is refused. A title is held by one session at a time in the
whole store (Hermes keeps a unique index on sessions.title), so that /resume by title names one.
"""

from __future__ import annotations

import re
from typing import Iterable

from ..errors import InvalidRequest

MAX_TITLE_LENGTH = 100

# ASCII controls except tab, newline and carriage return (those become spaces below).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Zero-width, bidirectional overrides and isolates, object replacement, interlinear annotation.
_INVISIBLE = re.compile(r"[\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufffc\ufff9-\ufffb]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_NUMBERED = re.compile(r"^(.*?) #(\d+)$")


def clean_title(text: str | None) -> str | None:
    """The title as it is stored, None when nothing is left; InvalidRequest when it is too long."""
    if text is not None and not isinstance(text, str):
        raise InvalidRequest(f"a title must be a string or None, not {type(text).__name__}")
    if not text:
        return None
    cleaned = _INVISIBLE.sub("", _CONTROL.sub("", _SURROGATE.sub("\ufffd", text)))
    cleaned = re.sub(r"\s+", " ", cleaned).strip()
    if not cleaned:
        return None
    if len(cleaned) > MAX_TITLE_LENGTH:
        raise InvalidRequest(f"Title too long ({len(cleaned)} chars, max {MAX_TITLE_LENGTH})")
    return cleaned


def lineage_base(title: str) -> str:
    """"plan #3" -> "plan": the name a lineage's titles share."""
    numbered = _NUMBERED.match(title)
    return numbered.group(1) if numbered else title


def in_lineage(title: str, base: str) -> bool:
    return title == base or (title.startswith(base + " #") and title[len(base) + 2:].isdigit())


def next_in_lineage(base_title: str, taken: Iterable[str]) -> str:
    """The base itself when no session holds it or a numbered variant, else "<base> #N+1" past the
    highest number in use (the unnumbered original counts as #1)."""
    base = lineage_base(base_title)
    used = [t for t in taken if in_lineage(t, base)]
    if not used:
        return base
    highest = max([1, *(int(m.group(2)) for t in used if (m := _NUMBERED.match(t)) and m.group(1) == base)])
    return f"{base} #{highest + 1}"


def named_by(title: str, titled: Iterable[tuple[str, str]]) -> str | None:
    """The session `/resume TITLE` names, from (session_id, title) pairs newest first: the one
    holding exactly that title, else the newest of its lineage ("<title> #N"). Hermes prefers the
    numbered one even when the exact title exists, which leaves a branched-from session unreachable
    by its own name; here the exact title wins."""
    newest_numbered = None
    for session_id, held in titled:
        if held == title:
            return session_id
        if newest_numbered is None and in_lineage(held, title):
            newest_numbered = session_id
    return newest_numbered


__all__ = ["MAX_TITLE_LENGTH", "clean_title", "in_lineage", "lineage_base", "named_by",
           "next_in_lineage"]
