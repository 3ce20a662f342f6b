"""The headers every answer of the viewer carries.

- Content-Security-Policy: the pages load their script, style and icon from /static only, and
  may not be framed (`frame-ancestors 'none'`, and X-Frame-Options for older browsers): framed
  by another site, the viewer's own reload and check buttons would send its own Origin, and a
  click tricked out of the operator would pass the same-origin gate.
- X-Content-Type-Options: nosniff, so that a JSON answer or an asset is never read as HTML.
- Referrer-Policy: no-referrer, so that a `?token=` URL never travels in a Referer.
- Cache-Control: no-store on everything but /static, as the pages hold transcripts.
"""

from __future__ import annotations

from typing import Any, MutableMapping

from starlette.types import ASGIApp, Receive, Scope, Send

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none';"
       " base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
ALWAYS = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
          (b"x-frame-options", b"DENY"), (b"referrer-policy", b"no-referrer")]


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        extra = ALWAYS if scope["path"].startswith("/static/") else ALWAYS + [(b"cache-control", b"no-store")]

        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in dict(extra)]
                message["headers"] = headers + extra
            await send(message)

        await self.app(scope, receive, send_with_headers)
