"""slack-bolt in front of turnlog: accept the event, acknowledge it, run the turn after.

    app = App(token=..., signing_secret=...)
    TurnlogSlack(turnlog.open("gateway.db"), agent).attach(app)
    app.start(3000)

Slack wants an acknowledgement within 3 s and retries an event it got none for (with
`X-Slack-Retry-Num`), for about five minutes. The adapter registers Bolt's ack-then-lazy pair:
the ack function accepts the message durably (its `event_id` as the message id) and acks; the
lazy function, run by Bolt after the response went out, runs the key's turns under turnlog's
lease. A retried event carries the same event_id and is refused by turnlog's dedup: acked again,
never run twice. (Slack gives an app_mention and the message event of one message different
event_ids: subscribe to one of them.)

Sends: Slack answered with an error (SlackApiError): nothing was posted. A timeout after the
request was written may have posted: the ledger records `unknown`. A bot can read its channels'
history, so the default `reconcile` looks for the text among the bot's last messages there.
`agent(history, item)` is a plain function here (Bolt's App runs listeners in threads).
"""

from __future__ import annotations

import urllib.error
from typing import Any, Callable

from slack_bolt import App
from slack_sdk.errors import SlackApiError

from turnlog import SendOutcomeUnknown, SessionSource, Turnlog

from .gateway import AccountOption, account_of, classifying

PLATFORM = "slack"
HISTORY_LIMIT = 20
# chat.postMessage(channel, text, thread_ts): the platform send (a test may give its own).
Post = Callable[[str, str, "str | None"], Any]


class SlackSendFailed(RuntimeError):
    """A send that certainly did not reach Slack (the ledger may resend it as it is)."""


def source_of(body: dict[str, Any], account_id: str | None = None) -> SessionSource | None:
    """The SessionSource of an Events API body holding a user's message (None for anything else:
    a bot's message, an edit, an event without text)."""
    event = body.get("event") or {}
    if event.get("bot_id") or event.get("subtype") or not event.get("text") or not event.get("channel"):
        return None
    channel_type = event.get("channel_type")
    thread_ts = event.get("thread_ts")
    chat_type = "dm" if channel_type == "im" else "thread" if thread_ts else "group"
    return SessionSource(platform=PLATFORM, chat_id=event["channel"], chat_type=chat_type, user_id=event.get("user"),
                         thread_id=thread_ts, scope_id=body.get("team_id") or event.get("team"),
                         message_id=body.get("event_id"), account_id=account_id)


def as_send_outcome(failure: BaseException) -> BaseException:
    """SendOutcomeUnknown when the post may have reached Slack, SlackSendFailed when it cannot
    have, else the failure itself."""
    if isinstance(failure, SlackApiError):
        return SlackSendFailed(f"Slack refused the post: {failure.response.get('error')}")
    if isinstance(failure, urllib.error.URLError) and not isinstance(failure.reason, TimeoutError):
        return SlackSendFailed(f"could not reach Slack: {failure.reason}")
    if isinstance(failure, (TimeoutError, ConnectionResetError)):
        return SendOutcomeUnknown(f"the post may have reached Slack: {type(failure).__name__}: {failure}")
    return failure


class TurnlogSlack:
    """One Slack app in front of one Turnlog (`gateway` names its boots in `turnlog status`).
    The keys carry the app as their account: the event body's `api_app_id`, the same in every
    workspace the app is installed in (the key holds the workspace already); `account_id` names
    another (a string) or none (False), as for the other adapters (gateway.account_of)."""

    def __init__(self, turnlog: Turnlog, agent: Callable[[Any, Any], Any], *, gateway: str = PLATFORM,
                 post: Post | None = None, reconcile: Any = None, account_id: AccountOption = None) -> None:
        self.turnlog = turnlog
        self.account_option = account_id
        self.agent = agent
        self.gateway = gateway
        self.post = post
        self.reconcile = reconcile
        self.app: App | None = None

    def attach(self, app: App) -> App:
        self.app = app
        app.event("message")(ack=self.accept_event, lazy=[self.run_event])
        return app

    def accept_event(self, body: dict[str, Any], ack: Callable[..., Any]) -> None:
        """Bolt's ack function: accept durably, then ack (a retry is refused, and acked too)."""
        source = self.source_of(body)
        if source is not None:
            self.turnlog.accept(source, body["event"]["text"])
        ack()

    def run_event(self, body: dict[str, Any], client: Any) -> None:
        """Bolt's lazy function, after the ack: run the key's waiting turns."""
        source = self.source_of(body)
        if source is not None:
            self.run_turns(source, client)

    def source_of(self, body: dict[str, Any]) -> SessionSource | None:
        """The body's source, naming the app it reached as its account."""
        return source_of(body, account_of(self.account_option, body.get("api_app_id")))

    def run_turns(self, source: SessionSource, client: Any) -> None:
        """Run the source's key's waiting turns, each under turnlog's lease."""
        target = {"chat_id": source.chat_id, "thread_id": source.thread_id}
        while self.turnlog.run_next(source, self.agent, lambda text: self.send(client, target, text)) is not None:
            pass

    def send(self, client: Any, target: dict[str, Any], text: str) -> None:
        post = self.post or (lambda channel, body, thread: client.chat_postMessage(
            channel=channel, text=body, thread_ts=thread))
        with classifying(as_send_outcome):
            post(target["chat_id"], text, target.get("thread_id"))

    def start(self, client: Any) -> None:
        """Recover earlier boots, settle what they owed (unknown sends reconciled against the
        channel history), resume interrupted turns, run what was accepted but never run."""
        t = self.turnlog
        t.start_gateway(self.gateway)
        named = account_of(self.account_option, None)  # the app's own id comes with its first event
        t.sweep_deliveries(lambda target, text: self.send(client, target, text), platforms={PLATFORM},
                           accounts={named, None} if named is not None else None,
                           reconcile=self.reconcile or (lambda target, attempt: reconcile_history(client, target,
                                                                                                 attempt)))
        resumed: dict[str, Any] = {}

        def agent(history: Any, item: Any) -> Any:
            resumed.clear()
            resumed.update(item.source or {})
            return self.agent(history, item)
        t.resume_interrupted(agent, lambda text: self.send(client, resumed, text), platforms={PLATFORM},
                             accounts={named, None} if named is not None else None)
        for source in t.pending_inbound():
            if source.platform == PLATFORM and (named is None or source.account_id in (None, named)):
                self.run_turns(source, client)


def reconcile_history(client: Any, target: dict[str, Any], attempt: Any) -> bool | None:
    """Is the attempt's text among the bot's last messages in the channel (or thread)? None when
    the history cannot be read."""
    try:
        if target.get("thread_id"):
            page = client.conversations_replies(channel=target["chat_id"], ts=target["thread_id"], limit=HISTORY_LIMIT)
        else:
            page = client.conversations_history(channel=target["chat_id"], limit=HISTORY_LIMIT)
    except SlackApiError:
        return None
    return any(m.get("bot_id") and m.get("text") == attempt.text for m in page.get("messages", []))


__all__ = ["PLATFORM", "SlackSendFailed", "TurnlogSlack", "as_send_outcome", "reconcile_history", "source_of"]
