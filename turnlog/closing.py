"""Which of a Turnlog's objects are closed: the Turnlog itself, its groups (`t.turns`,
`t.maintenance`), and what it hands out that reads its store (an `AsOf` of `t.at`, an
`AsyncTurnlog`). Turnlog.close marks the Turnlog and its groups; what it handed out is tied to it
(`tie`) and is closed with it. The guard of their public methods (`refuse_after_close`) asks, so
that a closed one raises TurnlogClosed rather than the store's own error. Held weakly: a closed
object is forgotten with it."""

from __future__ import annotations

import functools
import inspect
import weakref
from typing import Any, Callable, Iterable

from .errors import TurnlogClosed

_CLOSED: "weakref.WeakSet[Any]" = weakref.WeakSet()
# An object handed out -> the Turnlog whose store it reads: closed when that one is, even if
# handed out while it was being closed.
_OWNERS: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


def mark_closed(*objects: Any) -> None:
    _CLOSED.update(objects)


def tie(obj: Any, owner: Any) -> None:
    """`obj` is closed whenever `owner` is."""
    _OWNERS[obj] = owner


def is_closed(obj: Any) -> bool:
    if obj in _CLOSED:
        return True
    owner = _OWNERS.get(obj)
    return owner is not None and owner in _CLOSED


def require_open(obj: Any, name: str) -> None:
    """TurnlogClosed if `obj` is closed: `name` (what was called) needs an open one."""
    if is_closed(obj):
        raise TurnlogClosed(f"the Turnlog is closed: {name} needs an open one")


def refuse_after_close(cls: type, name: str, *, still_open: Iterable[str] = ()) -> None:
    """Every public method and property of `cls` but `still_open` (those that need no store)
    raises TurnlogClosed once the object is closed, not the store's own error (sqlite3's "closed
    database", the pool's empty ConnectionPoolClosedError, a shut-down thread pool). Its own
    members only: inherited ones call these. `name`: what the object is called in the error
    (`turns`, `maintenance`, `AsOf`; "" for the Turnlog). One set look-up per call."""
    spared = set(still_open)
    for member_name, member in list(vars(cls).items()):
        if member_name.startswith("_") or member_name in spared:
            continue
        what = f"{name}.{member_name}" if name else member_name
        if isinstance(member, property) and member.fget is not None:
            setattr(cls, member_name, property(_open_only(member.fget, what), member.fset, member.fdel,
                                               member.__doc__))
        elif inspect.isfunction(member):
            setattr(cls, member_name, _open_only(member, what))


def _open_only(method: Callable[..., Any], name: str) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(method):
        @functools.wraps(method)
        async def guarded_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            require_open(self, name)
            return await method(self, *args, **kwargs)
        return guarded_async

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        require_open(self, name)
        return method(self, *args, **kwargs)
    return guarded
