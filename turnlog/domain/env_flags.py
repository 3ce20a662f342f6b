"""The TURNLOG_* variables that take a value, and the one rule that reads each kind: yes/no
(1/0, true/false, yes/no or on/off, in any case), seconds (a number in ASCII digits, as at the
command line), or one of a few words. Unset or blank: the default. Anything else is refused,
InvalidSetting naming the variable and what it takes, so that a typo never turns into the default
unseen. check_environment reads those the engine and its store read, when an EngineConfig is made:
before a database is opened or made.
"""

from __future__ import annotations

import math
import os
from typing import Sequence

from ..errors import InvalidSetting

ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")

# Each variable and its default. The store's are checked when an EngineConfig is made, before a
# database is opened or made (config.py); TURNLOG_LOG_JSON when turnlog.logs.configure reads it.
FLAGS = {
    "TURNLOG_COMPACT_EVENTS": True,  # storage/event_compressor.py
    "TURNLOG_ENCRYPTION": True,  # storage/encryption.py
    "TURNLOG_GROUP_COMMIT": True,  # storage/group_commit.py
    "TURNLOG_LOG_JSON": False,  # logs.py
}
STORE_FLAGS = ("TURNLOG_COMPACT_EVENTS", "TURNLOG_ENCRYPTION", "TURNLOG_GROUP_COMMIT")

# The store's variables of a few words (the first is the default) and of whole seconds.
SQLITE_SYNCHRONOUS = ("TURNLOG_SQLITE_SYNCHRONOUS", ("NORMAL", "OFF", "FULL", "EXTRA"))  # storage/sqlite_factory.py
WAL_CHECKPOINT = ("TURNLOG_WAL_CHECKPOINT", ("background", "inline"))  # storage/checkpointer.py
SQLITE_LOCK_TIMEOUT = ("TURNLOG_SQLITE_LOCK_TIMEOUT", 30)  # storage/sqlite_backend.py


def refuse(name: str, raw: str, what: str, takes: str) -> InvalidSetting:
    """The one form of every refusal: the variable, its value, what it is not and what it takes."""
    return InvalidSetting(f"{name}={raw!r} is not {what}: give {takes}")


def flag_value(name: str, raw: str | None, default: bool) -> bool:
    """`raw`, the value of the variable `name`, as a bool; InvalidSetting naming both otherwise."""
    if raw is None or not raw.strip():
        return default
    word = raw.strip().lower()
    if word in ON:
        return True
    if word in OFF:
        return False
    raise refuse(name, raw, "a yes/no value", "1/0, true/false, yes/no or on/off (any case)")


def env_flag(name: str) -> bool:
    """The yes/no variable `name` of FLAGS, read now."""
    return flag_value(name, os.environ.get(name), FLAGS[name])


def seconds_value(name: str, raw: str | None, default: float, *, least: str = "0 or more",
                  whole: bool = False) -> float:
    """`raw`, the value of the variable `name`, as seconds: `least` is "0 or more", "more than 0"
    or "any" (a negative one means something, as the freshness window's "off"); `whole`: no fraction."""
    if raw is None or not raw.strip():
        return default
    text = raw.strip()
    seconds = math.nan
    if text.isascii():  # float() also takes other digits: "٣٠" would be 30
        try:
            seconds = float(text)
        except ValueError:
            pass
    if (not math.isfinite(seconds) or (least == "0 or more" and seconds < 0)
            or (least == "more than 0" and seconds <= 0) or (whole and seconds != int(seconds))):
        takes = f"a {'whole ' if whole else ''}number in ASCII digits" + ("" if least == "any" else f", {least}")
        raise refuse(name, raw, f"a {'whole ' if whole else ''}number of seconds",
                     f"{takes} (e.g. {'30' if whole else '30 or 2.5'})")
    return seconds


def env_seconds(name: str, default: float, *, least: str = "0 or more") -> float:
    return seconds_value(name, os.environ.get(name), default, least=least)


def env_whole_seconds(name: str, default: int) -> int:
    """Whole seconds, 0 or more (what SQLite's lock timeout takes)."""
    return int(seconds_value(name, os.environ.get(name), default, whole=True))


def env_choice(name: str, choices: Sequence[str]) -> str:
    """One of `choices` (any case; unset or blank: the first), spelled as in `choices`."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return choices[0]
    for choice in choices:
        if raw.strip().lower() == choice.lower():
            return choice
    raise refuse(name, raw, "a known value", ", ".join(choices[:-1]) + f" or {choices[-1]} (any case)")


def check_environment() -> None:
    """Read every variable the store reads as it opens, so that a bad one is refused before a
    database is opened or made (EngineConfig calls this)."""
    for flag in STORE_FLAGS:
        env_flag(flag)
    env_choice(*SQLITE_SYNCHRONOUS)
    env_choice(*WAL_CHECKPOINT)
    env_whole_seconds(*SQLITE_LOCK_TIMEOUT)
