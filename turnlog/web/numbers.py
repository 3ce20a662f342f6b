"""Numbers in a request (a page, a log position): ASCII digits only. `str.isdigit()` also says
yes to superscripts and circled digits, which `int()` refuses, and to other scripts' digits."""

from __future__ import annotations

from .. import InvalidRequest


def is_number(raw: str) -> bool:
    return raw.isascii() and raw.isdigit()


def page_number(raw: str) -> int:
    if not is_number(raw) or int(raw) < 1:
        raise InvalidRequest(f"bad page {raw!r} (expected 1, 2, …)")
    return int(raw)


def position_text(raw: str) -> str:
    """`N` as `#N`, anything else (`#N`, an ISO time) unchanged: Turnlog.at judges it."""
    return "#" + raw if is_number(raw) else raw
