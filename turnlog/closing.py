"""Which of a Turnlog's objects are closed: the Turnlog itself and its groups (`t.turns`,
`t.maintenance`). Turnlog.close marks them; the guard of their public methods (api.py) asks, so
that a closed one raises TurnlogClosed rather than the store's own error. Held weakly: a closed
object is forgotten with it."""

from __future__ import annotations

import weakref
from typing import Any

_CLOSED: "weakref.WeakSet[Any]" = weakref.WeakSet()


def mark_closed(*objects: Any) -> None:
    _CLOSED.update(objects)


def is_closed(obj: Any) -> bool:
    return obj in _CLOSED
