"""Which of a Turnlog's objects are closed: the Turnlog itself, its groups (`t.turns`,
`t.maintenance`), and what it hands out that reads its store (an `AsOf` of `t.at`, an
`AsyncTurnlog`). Turnlog.close marks the Turnlog and its groups; what it handed out is tied to it
(`tie`) and is closed with it. The guard of their public methods (`refuse_after_close`) asks, so
that a closed one raises TurnlogClosed rather than the store's own error; the same guard says a
damaged database file as DamagedDatabase naming it (`opened`), whichever read met the damage.
Held weakly: a closed object is forgotten with it."""

from __future__ import annotations

import functools
import inspect
import weakref
from typing import Any, Callable, Iterable

from .errors import DamagedDatabase, TurnlogClosed, TurnlogError
from .storage.dbfile import damaged

_CLOSED: "weakref.WeakSet[Any]" = weakref.WeakSet()
# An object handed out -> the Turnlog whose store it reads (weakly: a group held by its Turnlog
# must not keep it alive): closed when that one is, even if handed out while it was being closed.
_OWNERS: "weakref.WeakKeyDictionary[Any, weakref.ref[Any]]" = weakref.WeakKeyDictionary()
_STORES: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()  # a Turnlog -> its database's name


def opened(turnlog: Any, display: str) -> None:
    """`turnlog` reads the database called `display` (what a DamagedDatabase names)."""
    _STORES[turnlog] = display


def mark_closed(*objects: Any) -> None:
    _CLOSED.update(objects)


def tie(obj: Any, owner: Any) -> None:
    """`obj` is closed whenever `owner` is."""
    _OWNERS[obj] = weakref.ref(owner)


def _owner(obj: Any) -> Any:
    """The Turnlog `obj` was tied to (None: none, or gone), or `obj` itself when it is not tied."""
    ref = _OWNERS.get(obj)
    return obj if ref is None else ref()


def is_closed(obj: Any) -> bool:
    if obj in _CLOSED:
        return True
    owner = _owner(obj)
    return owner is not obj and owner is not None and owner in _CLOSED


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


def saying_damage(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method`, raising DamagedDatabase for an error that is SQLite finding the file damaged."""
    @functools.wraps(method)
    def said(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as e:
            _raise_as_damage(self, e)
            raise
    return said


def _open_only(method: Callable[..., Any], name: str) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(method):
        @functools.wraps(method)
        async def guarded_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            require_open(self, name)
            try:
                return await method(self, *args, **kwargs)
            except Exception as e:
                _raise_as_damage(self, e)
                raise
        return guarded_async

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        require_open(self, name)
        try:
            return method(self, *args, **kwargs)
        except Exception as e:
            _raise_as_damage(self, e)
            raise
    return guarded


def _raise_as_damage(obj: Any, error: Exception) -> None:
    """Raise DamagedDatabase from `error` when it is SQLite finding the file damaged; else return
    (the caller raises `error` as it was)."""
    damage = _damage(obj, error)
    if damage is not None:
        raise damage from error


def _damage(obj: Any, error: Exception) -> DamagedDatabase | None:
    """DamagedDatabase for `error` when SQLite found the file damaged (a raw sqlite3 error, or the
    event store library's wrapping of one), else None. turnlog's own errors stay as raised (a
    damaged read model is ProjectionCorrupt: a rebuild repairs it)."""
    if isinstance(error, TurnlogError):
        return None
    owner = _owner(obj)
    return damaged(_STORES.get(owner, "the database") if owner is not None else "the database", error)
