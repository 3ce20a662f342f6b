"""The fake platform adapter: a send is one JSON line appended to a file, fsynced before it returns.

So a line in the file is a message the user received, even if the process was SIGKILLed right
after the send returned; a kill before the write leaves no line. Each line is one os.write on an
O_APPEND descriptor, so concurrent senders and a kill never tear or interleave lines.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

from turnlog import SessionSource


class FakeAdapter:
    def __init__(self, path: str | os.PathLike[str], *, linger_s: Callable[[], float] | None = None,
                 **tags: Any) -> None:
        self.path = str(path)
        self.tags = tags  # written on every line (round, boot, ...)
        self.linger_s = linger_s  # a pause after each send, as a slow platform API takes to return

    def _write(self, record: dict[str, Any]) -> None:
        data = (json.dumps({**self.tags, **record}, ensure_ascii=False) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if self.linger_s is not None:
            time.sleep(self.linger_s())

    def sender(self, source: SessionSource | None = None, via: str = "turn") -> Callable[[str], None]:
        """A turn's sender: the reply goes back to the chat it came from."""
        where = {"platform": source.platform, "chat_id": source.chat_id} if source is not None else {}

        def send(text: str) -> None:
            self._write({"via": via, **where, "text": text})
        return send

    def sweep_send(self, target: dict[str, Any], text: str) -> None:
        """The ledger sweep's sender: `target` says where the owed reply goes."""
        self._write({"via": "sweep", "platform": target.get("platform"), "chat_id": target.get("chat_id"),
                     "delivery_id": target.get("delivery_id"), "text": text})


def read_sent(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the sent lines, the lines that are not whole JSON objects)."""
    p = Path(path)
    if not p.exists():
        return [], []
    good, torn = [], []
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            torn.append(line)
            continue
        if isinstance(record, dict) and isinstance(record.get("text"), str):
            good.append(record)
        else:
            torn.append(line)
    return good, torn


# A gateway child (run by procs.crash) that sends its one reply through this adapter and is killed
# inside the send: the platform has the reply, the ledger does not know it was sent.
TURN_KILLED_IN_SEND = """
from harness.adapter import FakeAdapter
from turnlog import SessionSource
adapter = FakeAdapter(kit.work / "sent.jsonl")
src = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", message_id="m1")
t = kit.turnlog()
t.start_gateway("main")
def send(text):
    adapter.sender(src)(text)
    kit.ready(boot=t.owner)
    kit.hang()
t.handle_message(src, "deploy?", lambda h, i: "deployed to production", send)
"""
