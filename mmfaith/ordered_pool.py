"""Per-item work spread over the cores, its results in order: scorers' chunks, report's score dirs.

Contract
--------
`ordered_map(work, inputs, workers)` yields `work(x)` for each `x` of `inputs`, in the order of `inputs`, whatever
the number of workers (so what a caller writes from the results is the same bytes with 1 worker or 16).

- `inputs` are taken lazily (a generator reading a file block by block is read as the workers need the blocks):
  the first `workers` of them when the call starts, to size the pool, then one more each time a result is taken.
- With `workers` > 1 and more than one input, `work` runs on min(workers, len(inputs)) processes forked from this
  one when the call starts: `work` and what it reads (a closure over a loaded dataset and predictions) are
  inherited, not pickled, and read copy-on-write; each input and each result is pickled. At most 2 x workers
  inputs are in flight at a time, so this process holds that many results at most, however many inputs. Standard
  output and error are flushed before the fork (a child must not print the parent's buffered text again).
- With one worker or one input, or where fork is unavailable, it runs here, one input at a time.
- An exception raised by `work` in a worker is raised here, the workers stopped first; a worker that dies (killed,
  out of memory) is a one-line MmfaithError, never a wait forever.
- Call it before this process starts threads of its own (forking a process with threads is unsafe); a caller whose
  work uses threads or network clients (an LLM judge) passes workers=1.
"""
from __future__ import annotations

import collections
import concurrent.futures
import concurrent.futures.process
import itertools
import multiprocessing
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from mmfaith.errors import MmfaithError
from mmfaith.step_pool import available_cores

Input = TypeVar("Input")
Result = TypeVar("Result")

_WORK: Callable[[Any], Any] | None = None
"""The running call's work, set before the fork so that the workers inherit it."""


def _call(value: Any) -> Any:
    assert _WORK is not None
    return _WORK(value)


def ordered_map(work: Callable[[Input], Result], inputs: Iterable[Input], workers: int) -> Iterator[Result]:
    """`work(x)` for each x of `inputs`, in order, on `workers` forked processes (module docstring)."""
    remaining = iter(inputs)
    head = list(itertools.islice(remaining, max(workers, 1)))  # enough to size the pool; the rest taken as needed
    pending = itertools.chain(head, remaining)
    workers = min(workers, len(head))
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        yield from map(work, pending)
        return
    global _WORK
    sys.stdout.flush()
    sys.stderr.flush()
    _WORK = work  # the executor forks its processes at the first submit: they inherit `work` then
    try:
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            queued: collections.deque[concurrent.futures.Future[Any]] = collections.deque()
            for value in pending:
                queued.append(pool.submit(_call, value))
                if len(queued) >= 2 * workers:
                    yield _result(queued.popleft())
            while queued:
                yield _result(queued.popleft())
    finally:
        _WORK = None


def _result(future: concurrent.futures.Future[Any]) -> Any:
    """A worker's result; a worker that died (killed, out of memory) is a one-line error, never a wait forever."""
    try:
        return future.result()
    except concurrent.futures.process.BrokenProcessPool as exc:
        raise MmfaithError("a worker process died before it finished (killed, or out of memory?); run again (a "
                           "score's --workers 1 works in its own process alone).") from exc


def scoring_workers(workers: int | None) -> int:
    """The processes a scorer's `--workers` asks: the cores this process may use when None; 1 or more, else a
    one-line error."""
    if workers is None:
        return available_cores()
    if workers < 1:
        raise MmfaithError(f"--workers must be 1 or more, not {workers}.")
    return workers
