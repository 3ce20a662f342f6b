"""A fake Telegram Bot API on loopback for end-to-end tests of the real python-telegram-bot.

It serves getMe, getUpdates (long-poll style, honouring the offset; an update can be redelivered),
sendMessage (recorded; `hang_sends(n)` makes the next n record the message and then answer only
after the client has given up, so the client raises TimedOut) and answers `true` to anything else
(deleteWebhook...). `GET /_recorded` lists what sendMessage recorded, for a child's reconcile hook.
Waiting is on a condition with a timeout, never on fixed sleeps.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs

TOKEN = "123456:TEST-not-a-real-token"
BOT = {"id": 123456, "is_bot": True, "first_name": "Test", "username": "turnlog_test_bot",
       "can_join_groups": True, "can_read_all_group_messages": False, "supports_inline_queries": False}
HANG_S = 8.0  # how long a hung sendMessage keeps the client waiting (past its 1 s read timeout)


class FakeBotApi:
    """One bot's Bot API (its `token` and getMe answer `bot`); a second bot is a second server."""

    def __init__(self, token: str = TOKEN, bot: dict[str, Any] | None = None) -> None:
        self.token = token
        self.bot = bot or BOT
        self.cond = threading.Condition()
        self.updates: list[dict[str, Any]] = []
        self.redeliver: list[dict[str, Any]] = []  # served once more, whatever the offset
        self.offset = 0
        self.sent: list[dict[str, Any]] = []
        self.hang = 0
        self.redelivered = 0
        self.release = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "FakeBotApi":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    # -- what the test does ------------------------------------------------------------------

    def push(self, update_id: int, text: str, *, chat_id: int = 42, user: str = "alice") -> dict[str, Any]:
        update = {"update_id": update_id, "message": {
            "message_id": 1000 + update_id, "date": int(time.time()), "text": text,
            "chat": {"id": chat_id, "type": "private", "first_name": user.title(), "username": user},
            "from": {"id": chat_id, "is_bot": False, "first_name": user.title(), "username": user}}}
        with self.cond:
            self.updates.append(update)
            self.cond.notify_all()
        return update

    def push_again(self, update: dict[str, Any]) -> None:
        """Redeliver an update the bot already confirmed (what Telegram does when the offset the
        bot confirmed was lost, or a webhook retry)."""
        with self.cond:
            self.redeliver.append(update)
            self.cond.notify_all()

    def hang_sends(self, n: int = 1) -> None:
        with self.cond:
            self.hang += n

    def wait(self, predicate: Callable[["FakeBotApi"], bool], timeout: float = 60.0, what: str = "") -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: predicate(self), timeout):
                raise AssertionError(f"timed out waiting for {what or predicate}; sent: {self.texts()}")

    def texts(self, chat_id: int | None = None) -> list[str]:
        return [m["text"] for m in self.sent if chat_id is None or m["chat_id"] == str(chat_id)]

    # -- the Bot API ---------------------------------------------------------------------------

    def call(self, method: str, params: dict[str, Any]) -> Any:
        if method == "getMe":
            return self.bot
        if method == "getUpdates":
            return self._get_updates(params)
        if method == "sendMessage":
            return self._send_message(params)
        return True

    def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        wait_s = min(float(params.get("timeout") or 0), 1.0)

        def ready() -> list[dict[str, Any]]:
            return self.redeliver + [u for u in self.updates if u["update_id"] >= self.offset]
        with self.cond:
            self.offset = max(self.offset, offset)  # an offset confirms every update before it
            self.cond.wait_for(lambda: bool(ready()), wait_s)
            batch = ready()
            self.redelivered += len(self.redeliver)
            self.redeliver = []
            self.cond.notify_all()
            return batch

    def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        with self.cond:
            message = {"message_id": 5000 + len(self.sent), "chat_id": str(params["chat_id"]),
                       "text": params["text"], "thread_id": params.get("message_thread_id")}
            self.sent.append(message)
            hang, self.hang = self.hang > 0, max(self.hang - 1, 0)
            self.cond.notify_all()
        if hang:  # recorded, but the answer comes only after the client gave up
            self.release.wait(HANG_S)
        return {"message_id": message["message_id"], "date": int(time.time()), "text": message["text"],
                "chat": {"id": int(message["chat_id"]), "type": "private"}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/_recorded":
                    with fake.cond:
                        self._answer(200, list(fake.sent))
                    return
                self._api({})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                if "json" in (self.headers.get("Content-Type") or ""):
                    params = json.loads(body or "{}")
                else:
                    params = {k: v[-1] for k, v in parse_qs(body).items()}
                self._api(params)

            def _api(self, params: dict[str, Any]) -> None:
                prefix = f"/bot{fake.token}/"
                if not self.path.startswith(prefix):
                    self._answer(404, {"ok": False, "error_code": 404, "description": "Not Found"})
                    return
                result = fake.call(self.path[len(prefix):].split("?")[0], params)
                self._answer(200, {"ok": True, "result": result})

            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a hung sendMessage)
        return Handler
