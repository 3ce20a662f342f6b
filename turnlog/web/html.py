"""Building HTML safely: every piece of data passes through `text()`, which escapes markup and
shows control and format characters as visible escapes instead of letting them act.
Attribute values (and the page's <title>) go through `attribute()`: markup cannot live there, so
there the visible escape is plain text (`\\x01`), and a path segment in a link is percent-encoded.

Format characters (Unicode category Cf) are invisible and act on the text around them: bidi
overrides and isolates reorder it, zero-width spaces, joiners and marks, the BOM and the tag
characters hide in it, so a title or key could read as another (Trojan Source). All of them are
shown escaped, but one: a zero-width joiner between two emoji, which only joins them into one
(👨‍👩‍👧); the tag characters of the flag sequences of England, Scotland and Wales are shown
escaped (they are also a way to hide ASCII), as is the soft hyphen."""

from __future__ import annotations

import html
import re
import unicodedata
from typing import Any, Iterable, Sequence
from urllib.parse import quote, urlencode

# C0 (except tab and newline), DEL, C1.
CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f"
# Every format character (category Cf) of Unicode 14 (a test checks it against unicodedata).
FORMAT = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
          "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438"
          "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
_INVISIBLE = re.compile(f"[{CONTROL}{FORMAT}]")
_CONTROL_SPAN = '<span class="ctl" title="{}">{}</span>'
ZWJ = "\u200d"


class Markup(str):
    """HTML that is already safe (built here, never from data)."""


def _escape_code(match: re.Match[str]) -> str:
    if _joins_emoji(match):
        return ZWJ
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _joins_emoji(match: re.Match[str]) -> bool:
    if match.group() != ZWJ:
        return False
    before, after = match.string[match.start() - 1:match.start()], match.string[match.end():match.end() + 1]
    # An emoji (So), possibly ended by its variation selector or skin tone, then an emoji.
    return (bool(before) and (unicodedata.category(before) == "So" or before == "\ufe0f"
                              or "\U0001f3fb" <= before <= "\U0001f3ff")
            and bool(after) and unicodedata.category(after) == "So")


def _visible(match: re.Match[str]) -> str:
    escaped = _escape_code(match)
    if escaped == ZWJ:
        return ZWJ
    char = match.group()
    what = "control character" if unicodedata.category(char) == "Cc" else \
        f"format character U+{ord(char):04X} {unicodedata.name(char, '')}".rstrip()
    return _CONTROL_SPAN.format(what, escaped)


def attribute(value: Any) -> str:
    """An attribute's value, quoted-safe, with control characters as visible text escapes."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return _INVISIBLE.sub(_escape_code, html.escape(str(value), quote=True))


def text(value: Any) -> Markup:
    if isinstance(value, Markup):
        return value
    if value is None:
        return Markup("")
    if isinstance(value, bool):
        return Markup("yes" if value else "no")
    return Markup(_INVISIBLE.sub(_visible, html.escape(str(value), quote=True)))


def join(parts: Iterable[Any], sep: str = "") -> Markup:
    return Markup(sep.join(text(p) for p in parts))


def tag(element: str, content: Any = "", /, **attrs: Any) -> Markup:
    rendered = "".join(f' {k.rstrip("_").replace("_", "-")}="{attribute(v)}"' for k, v in attrs.items()
                       if v is not None and v is not False)
    if element in _VOID:
        return Markup(f"<{element}{rendered}>")
    return Markup(f"<{element}{rendered}>{text(content)}</{element}>")


_VOID = {"input", "br", "img", "meta", "link"}


def link(href: str, content: Any, **attrs: Any) -> Markup:
    return tag("a", content, href=href, **attrs)


def session_href(session_id: str, *rest: Any) -> str:
    """The viewer's link to a session (and a sub-path), the id percent-encoded as one path segment."""
    return "/".join(["/sessions", quote(str(session_id), safe=""), *(quote(str(r), safe="") for r in rest)])


def url(path: str, **params: Any) -> str:
    kept = {k: v for k, v in params.items() if v not in (None, "")}
    return path + ("?" + urlencode(kept) if kept else "")


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str], *, cells: dict[str, Any] | None = None,
          empty: str = "nothing", **attrs: Any) -> Markup:
    """A table of rows; `cells[column](row)` renders a column specially (a link), else its text."""
    if not rows:
        return tag("p", empty, class_="empty")
    cells = cells or {}
    head = "".join(tag("th", c) for c in columns)
    body = []
    for row in rows:
        tds = "".join(tag("td", cells[c](row) if c in cells else _cell(row.get(c))) for c in columns)
        body.append(f"<tr>{tds}</tr>")
    return tag("table", Markup(f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody>"), **attrs)


def _cell(value: Any) -> Markup:
    if isinstance(value, (dict, list)):
        import orjson
        return text(orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode())
    return text(value)


NAV = (("/", "Gateway now"), ("/sessions", "Sessions"), ("/travel", "Time travel"),
       ("/integrity", "Integrity"), ("/plot", "Turns plot"))


def page(title: str, body: Any, *, path: str, query: str = "", snapshot: str = "") -> Markup:
    nav = "".join(tag("a", label, href=href, class_="here" if href == path else None) for href, label in NAV)
    json_href = quote(path, safe="/") + "?" + (query + "&" if query else "") + "format=json"
    return Markup(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{attribute(title)} · turnlog</title>"
        "<link rel=\"icon\" href=\"/static/favicon.svg\" type=\"image/svg+xml\">"
        "<link rel=\"stylesheet\" href=\"/static/style.css\"></head><body>"
        f"<header><strong>turnlog</strong><nav>{nav}</nav>"
        f"<form class=\"snapshot\" method=\"post\" action=\"/reload\">{text(snapshot)} "
        "<button type=\"submit\" title=\"read the database file again\">reload</button></form></header>"
        f"<main><h1>{text(title)}</h1>{text(body)}"
        f"<p class=\"twin\">{link(json_href, 'this page as JSON', class_='json-twin')}</p></main>"
        "<script src=\"/static/app.js\"></script></body></html>")
