"""One object per thread, made on first use: zstd's contexts are not safe to share between threads."""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

T = TypeVar("T")


def per_thread(make: Callable[[], T]) -> Callable[[], T]:
    """A getter returning this thread's object, made by `make` the first time the thread asks."""
    local = threading.local()

    def get() -> T:
        try:
            return local.value  # type: ignore[no-any-return]
        except AttributeError:
            value = local.value = make()
            return value

    return get
