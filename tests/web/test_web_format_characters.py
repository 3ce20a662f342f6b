"""Format characters (bidi overrides and isolates, zero-width spaces and joiners, the BOM, tag
characters: Unicode category Cf) in a title, a routing key, a chat name or a message are shown
escaped on every page, never left to reorder or hide text; plain, CJK and emoji text unchanged,
and a zero-width joiner between two emoji kept (it only joins them)."""

from __future__ import annotations

import re
import sys
import tempfile
import unicodedata

import pytest
from starlette.testclient import TestClient

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.web.app import create_app
from chat import echo

BASE = "http://127.0.0.1"
FAMILY = "👨\u200d👩\u200d👧"  # one emoji: a ZWJ sequence
TITLE = "invoice\u202egnp.exe"  # reads as "invoiceexe.png"
PLAIN = "東京 plain text 🎉 " + FAMILY


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = str(tmp_path / "log.db")
    src = SessionSource(platform="telegram", chat_type="group", chat_id="-100\u2066777\u2069",
                        chat_name="ad\u200bmins\ufeff", user_id="42", user_name="al\u200dice")
    with Turnlog(path, clock=ManualClock(), session_ids=SequentialIds()) as t:
        session_id = t.handle_message(src, f"{TITLE} \u2067there\u2069 \U000e0041 x\u200dy ad\u200bmins\ufeff {PLAIN}", echo,
                                      lambda text: None)[0].session_id
        t.command(src, f"/title {TITLE}")  # (the title rule drops it; the page must be safe either way)
        key = t.routing_key(src)
    assert "\u2066" in key
    return path, session_id


def raw_format_characters(html: str) -> list[str]:
    """The format characters left in the page, but the joiners of the family emoji."""
    return [f"U+{ord(c):04X}" for c in html.replace(FAMILY, "") if unicodedata.category(c) == "Cf"]


def test_format_characters_are_shown_escaped_on_every_page(hostile):
    path, session_id = hostile
    with TestClient(create_app(path), base_url=BASE) as c:
        pages = {p: c.get(p) for p in ("/", "/sessions", f"/sessions/{session_id}", f"/sessions/{session_id}/at/3",
                                       "/travel", "/travel?at=%233")}
    for path_, r in pages.items():
        assert r.status_code == 200, (path_, r.text[:300])
        assert raw_format_characters(r.text) == [], path_
    session = pages[f"/sessions/{session_id}"].text
    every = "".join(r.text for r in pages.values())
    for code, name in (("202e", "RIGHT-TO-LEFT OVERRIDE"), ("2066", "LEFT-TO-RIGHT ISOLATE"),
                       ("2069", "POP DIRECTIONAL ISOLATE"), ("200b", "ZERO WIDTH SPACE"),
                       ("feff", "ZERO WIDTH NO-BREAK SPACE"), ("2067", "RIGHT-TO-LEFT ISOLATE")):
        assert (f'<span class="ctl" title="format character U+{code.upper()} {name}">\\u{code}</span>'
                in every), code
    assert '<span class="ctl" title="format character U+E0041 TAG LATIN CAPITAL LETTER A">\\U000e0041</span>' in session
    assert 'x<span class="ctl" title="format character U+200D ZERO WIDTH JOINER">\\u200d</span>y' in session
    assert "invoice" + '<span class="ctl"' in session
    assert PLAIN in session  # CJK and emoji as they are, the family emoji whole


def test_the_format_set_is_unicodes():
    from turnlog.web.html import FORMAT
    cf = {chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"}
    assert set(re.findall(f"[{FORMAT}]", "".join(sorted(cf)))) == cf, unicodedata.unidata_version
