"""Steps that wait for one another, run side by side on worker processes (the suite quickstart's plan).

Contract
--------
`run_steps(steps, workers, progress)` runs each `Step` once every step its `after` names has ended, on
`workers` processes, the ready steps in the order given; it returns {step name: what its function returned}.

- The workers are forked from this process (spawned where fork is unavailable), so they start with the modules
  it has imported instead of importing them again; the pool forks them all before it starts any thread of its
  own. A step's function is a module-level function; its arguments and result are picklable.
- `with_results`: the function gets, after its `args`, {name: result} of the steps its `after` names.
- What a step prints (stdout and stderr) is held and printed here whole when the step ends, so the lines of two
  steps never interleave; with `progress`, a line with the step's name, wall and CPU seconds follows.
- A step that raises ends the run: the other steps' processes are stopped, what the failed step printed is
  shown, and its exception is raised here. A step waiting on a step that is not in `steps` is a ValueError
  before anything runs.

`available_cores()`: the cores this process may run on (its affinity, as `taskset` sets it), at least 1.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import io
import multiprocessing
import os
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Step:
    """One unit of work: `call(*args)` once the steps named in `after` have ended (module docstring)."""

    name: str
    call: Callable[..., Any]
    args: tuple[Any, ...] = ()
    after: tuple[str, ...] = ()
    with_results: bool = False


def available_cores() -> int:
    """The cores this process may run on (module docstring)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def run_steps(steps: Sequence[Step], workers: int, progress: bool = True) -> dict[str, Any]:
    """Run `steps` on `workers` processes as the module docstring says; {name: result}."""
    named = {step.name for step in steps}
    for step in steps:
        if not set(step.after) <= named:
            raise ValueError(f"step {step.name!r} waits on {sorted(set(step.after) - named)}, which are not steps")
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    pool = concurrent.futures.ProcessPoolExecutor(max(1, workers), mp_context=multiprocessing.get_context(method))
    results: dict[str, Any] = {}
    waiting, running = list(steps), {}
    try:
        while waiting or running:
            for step in [step for step in waiting if all(name in results for name in step.after)]:
                waiting.remove(step)
                given = ({name: results[name] for name in step.after},) if step.with_results else ()
                running[pool.submit(_held_output, step.call, (*step.args, *given))] = step
            ended, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in sorted(ended, key=lambda done: steps.index(running[done])):
                step = running.pop(future)
                printed, results[step.name], wall, cpu = future.result()
                sys.stdout.write(printed)
                if progress:
                    print(f"{step.name}: done in {wall:.1f} s ({cpu:.1f} CPU-s)", flush=True)
                sys.stdout.flush()
    except BaseException:
        for process in multiprocessing.active_children():
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return results


def _held_output(call: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any, float, float]:
    """(what `call(*args)` printed, its result, its wall seconds, its CPU seconds) in a worker; when it raises,
    what it printed goes to the worker's stderr first."""
    held = io.StringIO()
    started, cpu = time.perf_counter(), _cpu_seconds()
    try:
        with contextlib.redirect_stdout(held), contextlib.redirect_stderr(held):
            result = call(*args)
    except BaseException:
        sys.stderr.write(held.getvalue())
        raise
    return held.getvalue(), result, time.perf_counter() - started, _cpu_seconds() - cpu


def _cpu_seconds() -> float:
    """User and system CPU seconds of this process and of the children it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
