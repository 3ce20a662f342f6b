"""The Starlette app: routes, the ?format=json twin of every page, errors, and the access token."""

from __future__ import annotations

import hmac
import threading
from contextlib import asynccontextmanager
from urllib.parse import urlencode
from typing import Any, Callable, MutableMapping

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import InvalidRequest, NotFound, TooLarge, TurnlogError
from .html import Markup, page, tag, text
from . import page_gateway, page_integrity, page_sessions, page_travel, plot
from .headers import SecurityHeaders
from .origin import SameOriginGate
from .page_metrics import LiveMetrics
from .snapshot import Snapshot
from .viewer import MAX_DIFF_EVENTS, Busy, Result, Viewer

TOKEN_COOKIE = "turnlog_token"
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]


class _Json(JSONResponse):
    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, default=str, option=orjson.OPT_NON_STR_KEYS)


def _wants_json(request: Request) -> bool:
    """The one rule for every answer, errors included: JSON when asked by `?format=json`, or by an
    Accept header that rates application/json above text/html (a browser names text/html; a bare
    `*/*` gets HTML)."""
    if request.query_params.get("format") == "json":
        return True
    rated = _accept(request.headers.get("accept", ""))
    return rated.get("application/json", 0.0) > rated.get("text/html", 0.0)


def _accept(header: str) -> dict[str, float]:
    """The media types an Accept header names, with their quality (1 when not given)."""
    rated: dict[str, float] = {}
    for item in header.split(",")[:50]:  # a header of thousands of items is not worth reading whole
        kind, *params = (part.strip() for part in item.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        rated[kind.lower()] = max(rated.get(kind.lower(), 0.0), q)
    return rated


def _params(request: Request) -> dict[str, str]:
    return {k: v for k, v in request.query_params.items() if k not in ("format", "token")}


# An error names the value it refuses; one of 20,000 characters is cut, not echoed back whole.
MAX_MESSAGE = 200


def _error(request: Request, status: int, message: str) -> Response:
    if len(message) > MAX_MESSAGE:
        message = f"{message[:MAX_MESSAGE]}… (cut from {len(message)} characters)"
    if _wants_json(request):
        return _Json({"error": message, "status": status}, status_code=status)
    title = {400: "Bad request", 404: "Not found", 405: "Method not allowed", 413: "Too large",
             503: "Busy"}.get(status, "Error")
    return HTMLResponse(page(title, tag("p", message, class_="error"), path=request.url.path), status_code=status)


# Pages whose work grows with the stretch of log asked for (a diff) run at most this many at
# once; more are answered 503 at once rather than queued behind them. Every page is a plain
# function, which Starlette runs in its threadpool: the event loop keeps answering meanwhile.
HEAVY_AT_ONCE = 2


def _page(viewer: Viewer, build: Callable[..., Result], *path_params: str,
          heavy: threading.BoundedSemaphore | None = None) -> Callable[[Request], Any]:
    def endpoint(request: Request) -> Response:
        if heavy is not None and not heavy.acquire(blocking=False):
            return _error(request, 503, f"{HEAVY_AT_ONCE} diffs are running already; try again when one is done")
        try:
            return _build(viewer, build, request, path_params)
        finally:
            if heavy is not None:
                heavy.release()
    return endpoint


def _build(viewer: Viewer, build: Callable[..., Result], request: Request, path_params: tuple[str, ...]) -> Response:
    # The whole page, rendering included, reads the snapshot it started on (a reload meanwhile
    # closes that one only after this request is done with it).
    with viewer.use() as snap:
        try:
            result = build(snap, *(request.path_params[p] for p in path_params), _params(request))
        except NotFound as e:
            return _error(request, 404, str(e))
        except TooLarge as e:
            return _error(request, 413, str(e))
        except InvalidRequest as e:
            return _error(request, 400, str(e))
        except Busy as e:
            return _error(request, 503, str(e))
        if _wants_json(request):
            return _Json(result.data)
        return HTMLResponse(page(result.title, result.body, path=request.url.path, query=_requery(request),
                                 snapshot=snap.banner))


def _requery(request: Request) -> str:
    return urlencode([(k, v) for k, v in request.query_params.multi_items() if k not in ("format", "token")])


def _plot_page(viewer: Snapshot, params: dict[str, str]) -> Result:
    points = _points(viewer)
    body = tag("figure", text(_svg_markup(points)), id="plot")
    turns = sum(p["turns"] for p in points)
    return Result("Turns per minute and turn latency", {"turns": turns, "minutes": points},
                  text(tag("p", f"{turns} finished turns over {len(points)} minutes")) + body)


def _svg_markup(points: list[dict[str, Any]]) -> Markup:
    return Markup(plot.svg(points))  # built from numbers and escaped labels only


def _points(viewer: Snapshot) -> list[dict[str, Any]]:
    return viewer.cached("plot", lambda: plot.per_minute(viewer.t.turn_spans()))


class TokenGate:
    """Every request needs the token (query ?token=, `Authorization: Bearer`, or the cookie that a
    good ?token= sets); 401 otherwise."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope)
        given = request.query_params.get("token")
        auth = request.headers.get("authorization", "")
        candidates = [given, auth[7:] if auth.lower().startswith("bearer ") else None,
                      request.cookies.get(TOKEN_COOKIE)]
        if not any(c is not None and hmac.compare_digest(c.encode(), self.token.encode()) for c in candidates):
            response = PlainTextResponse("401: this viewer needs its access token (?token=…)", status_code=401)
            return await response(scope, receive, send)

        async def send_with_cookie(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start" and given is not None:
                cookie = f"{TOKEN_COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                message.setdefault("headers", []).append((b"set-cookie", cookie.encode()))
            await send(message)

        await self.app(scope, receive, send_with_cookie)


def create_app(path: str | None = None, *, viewer: Viewer | None = None, token: str | None = None,
               allowed_hosts: list[str] | None = None, max_diff_events: int = MAX_DIFF_EVENTS) -> Starlette:
    """The viewer of the SQLite database at `path` (opened read-only). `token`: required on every
    request. `allowed_hosts`: Host headers accepted (the CLI passes the loopback names when bound
    to loopback, so that a web page elsewhere cannot reach it by DNS rebinding). `max_diff_events`:
    a diff that would read more events is answered 413."""
    v = viewer or Viewer(path or "turnlog.db", max_diff_events=max_diff_events)
    heavy = threading.BoundedSemaphore(HEAVY_AT_ONCE)
    live = LiveMetrics(v.path)

    def metrics(request: Request) -> Response:
        try:
            body, media_type = live.scrape()
        except NotFound as e:  # the file is gone
            return _error(request, 404, str(e))
        except TurnlogError as e:  # the metrics extra is not installed; the file is damaged, not turnlog's
            return _error(request, 400, str(e))
        return Response(body, media_type=media_type)

    def job_json(request: Request) -> Response:
        try:
            return _Json(page_integrity.job(v, request.path_params["job_id"]).to_dict())
        except NotFound as e:
            return _error(request, 404, str(e))

    def run_check(request: Request) -> Response:
        try:
            job, started = page_integrity.start_check(v, request.query_params.get("check", ""))
        except InvalidRequest as e:
            return _error(request, 400, str(e))
        return _Json(job.to_dict(), status_code=202 if started else 200)

    def plot_svg(request: Request) -> Response:
        with v.use() as snap:
            return Response(plot.svg(_points(snap)), media_type="image/svg+xml")

    def reload(request: Request) -> Response:
        try:
            v.reload()
        except Busy as e:
            return _error(request, 503, str(e))
        except TurnlogError as e:  # the file went away, is damaged or cannot be read now
            return _error(request, 400, str(e))
        return RedirectResponse("/", status_code=303)

    routes = [
        Route("/", _page(v, page_gateway.gateway_now)),
        Route("/sessions", _page(v, page_sessions.sessions)),
        Route("/sessions/{session_id}", _page(v, page_sessions.session, "session_id")),
        Route("/sessions/{session_id}/at/{position}", _page(v, page_sessions.session_at, "session_id", "position")),
        Route("/travel", _page(v, page_travel.travel)),
        Route("/travel/diff", _page(v, page_travel.diff, heavy=heavy)),
        Route("/integrity", _page(v, page_integrity.integrity)),
        Route("/integrity/run", run_check, methods=["POST"]),
        Route("/integrity/checks/{job_id}", job_json),
        Route("/plot", _page(v, _plot_page)),
        Route("/plot.svg", plot_svg),
        Route("/reload", reload, methods=["POST"]),
        Route("/metrics", metrics),
        Mount("/static", StaticFiles(packages=[("turnlog.web", "static")]), name="static"),
    ]
    middleware = [Middleware(SecurityHeaders), Middleware(SameOriginGate)]
    if allowed_hosts:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts))
    if token:
        middleware.append(Middleware(TokenGate, token=token))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        yield
        live.close()
        v.close()

    async def http_error(request: Request, exc: Exception) -> Response:
        # No such route, or a method the route does not take: answered like the pages' own errors.
        assert isinstance(exc, HTTPException)
        detail = "no such page" if exc.status_code == 404 else str(exc.detail)
        response = _error(request, exc.status_code, f"{detail}: {request.method} {request.url.path}")
        response.headers.update(exc.headers or {})
        return response

    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                    exception_handlers={HTTPException: http_error})
    app.state.viewer = v
    return app
