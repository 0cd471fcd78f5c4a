"""Where build tasks run: in-process (one worker) or in a spawn pool with one library thread per worker.

`submit` returns a handle whose `get()` gives the result. In-process, the task runs only when its
result is asked for, so a task whose result is discarded costs nothing.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import cv2

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


class Pending(Protocol):
    def get(self) -> Any: ...


class _Deferred:
    def __init__(self, function: Callable[[Any], Any], argument: Any) -> None:
        self._function, self._argument = function, argument

    def get(self) -> Any:
        return self._function(self._argument)


def pin_worker_threads() -> None:
    cv2.setNumThreads(1)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


class WorkerPool:
    """`workers` processes (spawned, so no inherited locks or CUDA state) or the calling process."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool = None
        if workers > 1:
            saved = {name: os.environ.get(name) for name in THREAD_VARIABLES}
            os.environ.update({name: "1" for name in THREAD_VARIABLES})
            try:
                self.pool = multiprocessing.get_context("spawn").Pool(workers, initializer=pin_worker_threads)
            finally:
                for name, value in saved.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value

    @property
    def window(self) -> int:
        """How many tasks to keep submitted: enough to keep every worker busy while results are written."""
        return 1 if self.pool is None else 2 * self.workers

    def submit(self, function: Callable[[Any], Any], argument: Any) -> Pending:
        if self.pool is None:
            return _Deferred(function, argument)
        return self.pool.apply_async(function, (argument,))

    def map(self, function: Callable[[Any], Any], arguments: Iterable[Any]) -> list[Any]:
        if self.pool is None:
            return [function(argument) for argument in arguments]
        return self.pool.map(function, list(arguments), chunksize=1)

    def close(self, abort: bool = False) -> None:
        """Stop the workers: let them finish, or (after an error or Ctrl-C) end them at once."""
        if self.pool is not None:
            if abort:
                self.pool.terminate()
            else:
                self.pool.close()
            self.pool.join()
