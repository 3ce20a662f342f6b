"""Scripted gateway traffic, deterministic from a seed.

Several keys on several platforms get normal messages, `/queue` items and now and then an internal
wake-up (some of which the agent answers with "[SILENT]"). One more key, the looping one, only
gets normal messages, and its agent hangs on every turn until the process is killed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from turnlog import SessionSource

HUMAN, QUEUE, WAKEUP = "human", "queue", "wakeup"
LOOP_KEY = "loop"
# logical key -> (platform, chat_type, chat_id, user_id, scope_id)
KEYS: dict[str, tuple[str, str, str, str, str | None]] = {
    "tg-alice": ("telegram", "dm", "1001", "1001", None),
    "tg-group": ("telegram", "group", "-200", "1002", None),
    "dc-bob": ("discord", "dm", "3001", "3001", None),
    "sl-chan": ("slack", "channel", "C42", "U7", "T1"),
    "sg-carol": ("signal", "dm", "+15550001", "+15550001", None),
    LOOP_KEY: ("telegram", "dm", "loop", "4004", None),
}
NORMAL_KEYS = [k for k in KEYS if k != LOOP_KEY]
LOOP_EVERY = 9  # about one step in this many is a message to the looping key


@dataclass(frozen=True)
class Step:
    index: int
    key: str
    kind: str  # human | queue | wakeup
    text: str
    message_id: str
    silent: bool  # a wake-up the agent answers with "[SILENT]"
    think_ms: int  # how long the agent works on it

    @property
    def looping(self) -> bool:
        return self.key == LOOP_KEY

    def source(self) -> SessionSource:
        return source_of(self.key, self.message_id)


def source_of(key: str, message_id: str | None = None) -> SessionSource:
    platform, chat_type, chat_id, user_id, scope_id = KEYS[key]
    return SessionSource(platform=platform, chat_type=chat_type, chat_id=chat_id, user_id=user_id,
                         scope_id=scope_id, message_id=message_id)


def key_of(platform: str, chat_id: str) -> str:
    for key, (p, _, c, _, _) in KEYS.items():
        if (p, c) == (platform, chat_id):
            return key
    raise KeyError(f"no scripted key for {platform}:{chat_id}")


def make_script(seed: int, length: int) -> list[Step]:
    rng = random.Random(f"turnlog-kill9-script:{seed}")
    steps = []
    for i in range(length):
        looping = i == 2 or (i > 2 and rng.randrange(LOOP_EVERY) == 0)
        key = LOOP_KEY if looping else rng.choice(NORMAL_KEYS)
        roll = rng.random()
        kind = HUMAN if looping or roll < 0.65 else (QUEUE if roll < 0.88 else WAKEUP)
        silent = kind == WAKEUP and rng.random() < 0.5
        text = {HUMAN: f"message {i} for {key}", QUEUE: f"queued task {i}", WAKEUP: f"wake-up {i}: any news?"}[kind]
        steps.append(Step(i, key, kind, text, f"s{seed}-m{i}", silent, rng.randrange(2, 40)))
    return steps
