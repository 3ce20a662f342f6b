"""The yes/no TURNLOG_* variables and the one rule that reads them: 1/0, true/false, yes/no or
on/off, in any case (unset or blank: the default). Anything else is refused naming the variable,
so that a typo never turns into the default unseen (the seconds variables: config.py)."""

from __future__ import annotations

import os

from ..errors import InvalidRequest

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


def flag_value(name: str, raw: str | None, default: bool) -> bool:
    """`raw`, the value of the variable `name`, as a bool; InvalidRequest naming both otherwise."""
    if raw is None or not raw.strip():
        return default
    word = raw.strip().lower()
    if word in ON:
        return True
    if word in OFF:
        return False
    raise InvalidRequest(f"{name}={raw!r} is not a yes/no value: give 1/0, true/false, yes/no or on/off"
                         " (any case)")


def env_flag(name: str) -> bool:
    """The yes/no variable `name` of FLAGS, read now."""
    return flag_value(name, os.environ.get(name), FLAGS[name])
