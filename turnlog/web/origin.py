"""Refusing cross-site requests that change something: a POST is served only when the browser
says it comes from this viewer's own pages.

A browser names the page a request comes from: `Origin` on every POST (`null` from sandboxed or
privacy-restricted pages), `Referer` otherwise, and `Sec-Fetch-Site`. A POST whose origin is not
this viewer's own host is refused with 403, so a page elsewhere cannot make the operator's browser
reload snapshots or start checks. A request with none of them is not a browser's cross-site
request (curl, scripts, the test client) and is served, as the token gate already decides who
may reach the viewer at all.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def same_origin(request: Request) -> bool:
    host = request.headers.get("host", "").lower()
    if request.headers.get("sec-fetch-site", "same-origin").lower() not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is not None:
        return _netloc(origin) == host and bool(host)
    referer = request.headers.get("referer")
    if referer is not None:
        return _netloc(referer) == host and bool(host)
    return True


def _netloc(value: str) -> str | None:
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return None
    if parts.scheme not in ("http", "https"):
        return None  # `null` and anything else that names no web origin
    return parts.netloc.lower()


class SameOriginGate:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS and not same_origin(Request(scope)):
            response = PlainTextResponse("403: cross-site request refused (this viewer only accepts changes"
                                         " from its own pages)", status_code=403)
            return await response(scope, receive, send)
        await self.app(scope, receive, send)
