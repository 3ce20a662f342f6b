"""Python's cyclic garbage collector, paused around bulk work.

Replaying or importing batches of events makes many short-lived objects and keeps many alive (a
batch's events, saved aggregates, a home's rows), but no reference cycles: each collection would
scan them all again (it doubled the cost of decoding in a rebuild, and took 14% of an import's
CPU) and free nothing. Reference counting still frees everything meanwhile.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """The collector off for the block, then as it was (also when the block fails)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
