"""The cyclic garbage collector paused while a reader makes many objects that are never garbage.

Reading a dataset or a predictions file makes millions of small objects (parsed JSON, kept fields, the tuples
workers send back) and no reference cycles: the collector's passes over every live object, triggered by the
allocations alone, then cost more than the reading itself (issue 34, docs/scale.md: unpickling a block's lines took
eight times as long with the collector running). `gc_paused()` turns it off for the block and restores it after;
processes forked inside it (mmfaith/ordered_pool.py) inherit it off for their life. Objects freed by reference
counting are freed as ever; only cyclic garbage made meanwhile waits for the next collection.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """The collector off inside the block, as it was after (nested uses leave it off until the outermost ends)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
