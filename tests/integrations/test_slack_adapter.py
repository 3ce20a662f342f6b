"""The slack-bolt adapter, offline: a real Bolt App (verification off) dispatching BoltRequests,
a retried event with the X-Slack-Retry-Num headers, Bolt's lazy listeners run on an executor that
runs them at once (so the test needs no waiting), the post recorded."""

from __future__ import annotations

import json
from concurrent.futures import Executor, Future
from typing import Any, Callable

import pytest

pytest.importorskip("slack_bolt")

from slack_bolt import App, BoltRequest  # noqa: E402
from slack_bolt.authorization import AuthorizeResult  # noqa: E402
from slack_sdk import WebClient  # noqa: E402

import turnlog  # noqa: E402
from chat import echo  # noqa: E402
from turnlog.integrations.slack import TurnlogSlack, as_send_outcome, source_of  # noqa: E402


# Where the app's Web API client points: a closed port on loopback, so nothing reaches the network.
NOWHERE = "http://127.0.0.1:9/api/"


def authorize(**_: Any) -> AuthorizeResult:
    """The team's installation, known without calling auth.test."""
    return AuthorizeResult(enterprise_id=None, team_id="T1", bot_token="xoxb-not-a-real-token", bot_id="B0",
                           bot_user_id="U0")


class AtOnce(Executor):
    """Runs what Bolt submits (its lazy listeners) in the calling thread, after the ack."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def body(event_id: str, text: str, *, channel: str = "C1", user: str = "U42", app: str = "A1") -> dict[str, Any]:
    return {"token": "x", "team_id": "T1", "api_app_id": app, "type": "event_callback", "event_id": event_id,
            "event_time": 1, "event": {"type": "message", "channel": channel, "channel_type": "channel",
                                        "user": user, "text": text, "ts": "1.000100"}}


def request(payload: dict[str, Any], retry: int | None = None) -> BoltRequest:
    headers = {"content-type": ["application/json"]}
    if retry is not None:
        headers |= {"x-slack-retry-num": [str(retry)], "x-slack-retry-reason": ["http_timeout"]}
    return BoltRequest(body=json.dumps(payload), headers=headers)


@pytest.fixture
def slack(t: turnlog.Turnlog) -> tuple[App, list[str], list[str]]:
    order: list[str] = []
    posted: list[str] = []

    def post(channel: str, text: str, thread: str | None) -> None:
        order.append(f"post {text}")
        posted.append(text)

    adapter = TurnlogSlack(t, echo, post=post)
    original = adapter.accept_event

    def accept_event(body: dict[str, Any], ack: Callable[..., Any]) -> None:
        original(body, lambda *a, **k: (order.append("ack"), ack(*a, **k)))
    adapter.accept_event = accept_event  # type: ignore[method-assign]
    app = App(signing_secret="secret", authorize=authorize, request_verification_enabled=False,
              token_verification_enabled=False, listener_executor=AtOnce(),
              client=WebClient(base_url=NOWHERE))
    adapter.attach(app)
    return app, posted, order


def test_a_retried_event_is_acked_and_runs_one_turn(t: turnlog.Turnlog, slack: Any) -> None:
    app, posted, order = slack
    first = app.dispatch(request(body("Ev1", "hello")))
    retried = app.dispatch(request(body("Ev1", "hello"), retry=1))
    assert (first.status, retried.status) == (200, 200)
    app.dispatch(request(body("Ev2", "again")))
    assert posted == ["re: hello", "re: again"]
    assert order[:2] == ["ack", "post re: hello"]  # acked before the turn ran
    source = source_of(body("Ev1", "hello"), account_id="A1")  # the app it reached
    assert source is not None and source.message_id == "Ev1" and source.scope_id == "T1"
    assert [f.message_id for f in t.message_fates(source)] == ["Ev1", "Ev2"]


def test_the_apps_own_messages_are_not_answered(t: turnlog.Turnlog, slack: Any) -> None:
    app, posted, order = slack
    mine = body("Ev3", "a reply of mine")
    mine["event"]["bot_id"] = "B1"
    assert app.dispatch(request(mine)).status == 200
    assert posted == [] and t.ledger() == []


def test_a_post_that_timed_out_is_unknown_a_refused_one_is_not() -> None:
    from slack_sdk.errors import SlackApiError
    assert isinstance(as_send_outcome(TimeoutError("read timed out")), turnlog.SendOutcomeUnknown)
    refused = SlackApiError("not_in_channel", {"ok": False, "error": "not_in_channel"})
    assert not isinstance(as_send_outcome(refused), turnlog.SendOutcomeUnknown)


class History:
    """The part of slack_sdk's WebClient that reconcile reads: what the app posted in a channel."""

    def __init__(self, posted: list[str]) -> None:
        self.posted = posted

    def conversations_history(self, channel: str, limit: int) -> dict[str, Any]:
        return {"ok": True, "messages": [{"bot_id": "B0", "text": text} for text in reversed(self.posted)][:limit]}


def test_a_post_that_timed_out_is_reconciled_from_the_history_at_the_next_start(make_turnlog: Any) -> None:
    posted: list[str] = []

    def post_then_time_out(channel: str, text: str, thread: str | None) -> None:
        posted.append(text)
        raise TimeoutError("the read timed out after the post was written")

    first = make_turnlog(owner="boot-1")
    TurnlogSlack(first, echo, post=post_then_time_out).start(History(posted))
    source = TurnlogSlack(first, echo).source_of(body("Ev1", "hello"))
    assert source is not None
    first.accept(source, "hello")
    TurnlogSlack(first, echo, post=post_then_time_out).run_turns(source, History(posted))
    assert [row.state for row in first.ledger()] == ["unknown"]
    first.close()

    again = make_turnlog(owner="boot-2")
    TurnlogSlack(again, echo, post=lambda *a: posted.append(a[1])).start(History(posted))
    assert posted == ["re: hello"]
    assert [row.state for row in again.ledger()] == ["delivered"]


@pytest.mark.parametrize("option, keys", [
    (None, ["agent:main:slack:group:T1:A1:C1:U42", "agent:main:slack:group:T1:A2:C1:U42"]),  # the app's id
    ("ops-app", ["agent:main:slack:group:T1:ops-app:C1:U42"]),  # named: both apps' events land in one
    (False, ["agent:main:slack:group:T1:C1:U42"]),  # no account: the key of a one-app gateway
], ids=["from-the-app", "explicit", "none"])
def test_the_app_an_event_reached_is_the_keys_account(t: turnlog.Turnlog, option: Any, keys: list[str]) -> None:
    adapter = TurnlogSlack(t, echo, post=lambda *a: None, account_id=option)
    for event_id, app in (("Ev1", "A1"), ("Ev2", "A2")):  # one user, one channel, two apps
        event = body(event_id, "hello", app=app)
        adapter.accept_event(event, lambda *a, **k: None)
        adapter.run_event(event, client=None)
    assert sorted(s.session_key for s in t.sessions()) == keys
