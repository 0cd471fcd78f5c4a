"""Per-item work spread over the cores, its results in order: scorers' chunks, report's score dirs.

Contract
--------
`ordered_map(work, inputs, workers)` yields `work(x)` for each `x` of `inputs`, in the order of `inputs`, whatever
the number of workers (so what a caller writes from the results is the same bytes with 1 worker or 16).

- With `workers` > 1 and more than one input, `work` runs on min(workers, len(inputs)) processes forked from this
  one when the call starts: `work` and what it reads (a closure over a loaded dataset and predictions) are
  inherited, not pickled, and read copy-on-write; each input and each result is pickled. At most 2 x workers
  inputs are in flight at a time, so this process holds that many results at most, however many inputs. Standard
  output and error are flushed before the fork (a child must not print the parent's buffered text again).
- With one worker or one input, or where fork is unavailable, it runs here, one input at a time.
- An exception raised by `work` in a worker is raised here, the workers stopped first.
- Call it before this process starts threads of its own (forking a process with threads is unsafe); a caller whose
  work uses threads or network clients (an LLM judge) passes workers=1.
"""
from __future__ import annotations

import collections
import multiprocessing
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from mmfaith.errors import MmfaithError

Input = TypeVar("Input")
Result = TypeVar("Result")

_WORK: Callable[[Any], Any] | None = None
"""The running call's work, set before the fork so that the workers inherit it."""


def _call(value: Any) -> Any:
    assert _WORK is not None
    return _WORK(value)


def ordered_map(work: Callable[[Input], Result], inputs: Iterable[Input], workers: int) -> Iterator[Result]:
    """`work(x)` for each x of `inputs`, in order, on `workers` forked processes (module docstring)."""
    pending = list(inputs)
    workers = min(workers, len(pending))
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        yield from map(work, pending)
        return
    global _WORK
    sys.stdout.flush()
    sys.stderr.flush()
    _WORK = work
    try:
        pool = multiprocessing.get_context("fork").Pool(workers)
    finally:
        _WORK = None
    with pool:
        queued: collections.deque[Any] = collections.deque()
        for value in pending:
            queued.append(pool.apply_async(_call, (value,)))
            if len(queued) >= 2 * workers:
                yield queued.popleft().get()
        while queued:
            yield queued.popleft().get()


def scoring_workers(workers: int | None) -> int:
    """The processes a scorer's `--workers` asks: the cores this process may use when None; 1 or more, else a
    one-line error."""
    if workers is None:
        from mmfaith.step_pool import available_cores

        return available_cores()
    if workers < 1:
        raise MmfaithError(f"--workers must be 1 or more, not {workers}.")
    return workers
