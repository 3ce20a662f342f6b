"""Checking a platform sender's signature before it is first called.

A sender with the wrong number of parameters would fail every call with a TypeError, which the
delivery ledger records as a failed attempt: every redelivery would fail quietly. So the engine
checks the signature up front and says what it expected.
"""

from __future__ import annotations

import inspect
from typing import Any

from ..errors import InvalidRequest


def require_sender(send: Any, parameters: tuple[str, ...], what: str) -> None:
    """Raise InvalidRequest unless `send` can be called with these positional arguments."""
    expected = f"send({', '.join(parameters)})"
    if not callable(send):
        raise InvalidRequest(f"{what} needs a sender {expected}, not {type(send).__name__}")
    try:
        signature = inspect.signature(send)
    except (TypeError, ValueError):
        return  # a builtin without a signature: nothing can be checked before calling it
    try:
        signature.bind(*parameters)
    except TypeError:
        name = getattr(send, "__qualname__", type(send).__name__)
        raise InvalidRequest(f"{what} calls {expected}; the sender {name}{signature} cannot take that") from None


__all__ = ["require_sender"]
