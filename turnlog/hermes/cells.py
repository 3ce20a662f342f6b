"""The values of a Hermes row as an import can use them, whatever a damaged or doctored state.db holds.

SQLite stores whatever it is given: invalid UTF-8 in a TEXT column, a BLOB where text belongs, text
where a number belongs. One such cell must not abort an import, so the read connection decodes text
itself (`Decoder`: invalid bytes kept as surrogate escapes, so they can be found again) and every
row the import uses passes through `clean`: a cell that is not what its column holds is repaired
when a repair keeps its meaning (bytes decoded with U+FFFD replacement characters, a number's text,
a numeric string's number), else it takes the column's default, and each repair is named.
"""

from __future__ import annotations

import math
import re
from typing import Any

_SURROGATES = re.compile("[\udc80-\udcff]")
# Times a datetime can hold (years 1970..9999): beyond them a message's time is not a time.
MAX_EPOCH = 253402300799.0


class Decoder:
    """text_factory of the read connection. Counts what it could not decode strictly, so that a
    reader checks the cells of a chunk only when the chunk held one (the common case costs one
    strict decode per cell)."""

    def __init__(self) -> None:
        self.escaped = 0

    def __call__(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.escaped += 1
            return raw.decode("utf-8", "surrogateescape")


def is_clean_text(value: Any) -> bool:
    """A str that came out of valid UTF-8."""
    return type(value) is str and _SURROGATES.search(value) is None


def text(value: Any, name: str, notes: list[str]) -> str | None:
    """A TEXT cell as str (None stays None); a repair is added to `notes`."""
    if value is None or is_clean_text(value):
        return value
    if type(value) is str:
        notes.append(f"{name} is not valid UTF-8: decoded with replacement characters")
        return _SURROGATES.sub("\ufffd", value)
    if isinstance(value, bytes):
        notes.append(f"{name} is a BLOB: decoded as UTF-8 with replacement characters")
        return value.decode("utf-8", "replace")
    if isinstance(value, (int, float)):
        notes.append(f"{name} is a number ({value!r}): kept as its text")
        return repr(value) if isinstance(value, float) else str(value)
    notes.append(f"{name} has an unreadable value: dropped")
    return None


def integer(value: Any, name: str, default: int | None, notes: list[str], *, minimum: int | None = None) -> int | None:
    """An INTEGER cell as int; what is not a whole number (in range) takes `default`."""
    if type(value) is int and (minimum is None or value >= minimum):
        return value
    if value is None:
        return default
    number: Any = value
    if isinstance(value, (str, bytes)):
        try:
            number = float(value)
        except ValueError:
            number = None
    if isinstance(number, float) and number.is_integer() and (minimum is None or number >= minimum):
        notes.append(f"{name} is {_shown(value)}: read as {int(number)}")
        return int(number)
    notes.append(f"{name} is {_shown(value)}, not a whole number{'' if minimum is None else f' >= {minimum}'}:"
                 f" {'dropped' if default is None else f'read as {default}'}")
    return default


def epoch(value: Any, name: str, notes: list[str]) -> float | None:
    """A REAL time cell (epoch seconds) as float; None when it is not a time a datetime can hold."""
    number: Any = value
    if isinstance(value, (str, bytes)):
        try:
            number = float(value)
        except ValueError:
            number = None
    if isinstance(number, (int, float)) and not isinstance(number, bool) and math.isfinite(number) \
            and 0 <= number <= MAX_EPOCH:
        if type(value) is not float and type(value) is not int:
            notes.append(f"{name} is {_shown(value)}: read as {float(number)}")
        return float(number)
    if value is not None:
        notes.append(f"{name} is {_shown(value)}, not a time")
    return None


def clean(row: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """A row of unknown cells (a sessions, usage or ledger row) with every text cell clean: what goes
    into an event must be valid text, numbers or NULL."""
    out: dict[str, Any] = {}
    for name, value in row.items():
        if value is None or type(value) in (int, float):
            if type(value) is float and not math.isfinite(value):
                notes.append(f"{name} is {value!r}: dropped")
                value = None
            out[name] = value
        else:
            out[name] = text(value, name, notes)
    return out


def _shown(value: Any) -> str:
    if isinstance(value, bytes):
        return f"a {len(value)}-byte BLOB"
    shown = repr(value)
    return shown if len(shown) <= 40 else f"{shown[:40]}…"
