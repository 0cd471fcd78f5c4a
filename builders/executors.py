"""The one seam where every family's builder gets its workers: the local pool or a Ray cluster.

`--executor local` (default) is the spawn pool of builders/worker_pool.py with `--workers`
processes; `--executor ray` runs the same work units as Ray tasks (builders/ray_pool.py): on the
cluster at `--ray-address`, or on a Ray instance started here with `--workers` CPUs when no
address is given; `--executor auto` joins a running cluster (RAY_ADDRESS, or one started with
`ray start` on this machine) when there is one, else uses the local pool. Whatever the executor,
the driver keeps the plan and the journal and handles results in slot order, so the build's
files are the same bytes (docs/scale.md).
"""
from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mmfaith.builders.worker_pool import Pending, WorkerPool
from mmfaith.errors import MmfaithError

EXECUTORS = ("local", "ray", "auto")


class Executor(Protocol):
    """What a builder needs of its workers (WorkerPool and RayPool both are one)."""

    @property
    def window(self) -> int: ...

    def submit(self, function: Callable[[Any], Any], argument: Any) -> Pending: ...

    def map(self, function: Callable[[Any], Any], arguments: Iterable[Any]) -> list[Any]: ...

    def close(self, abort: bool = False) -> None: ...


@dataclass(frozen=True)
class ExecutorChoice:
    """`--executor`, `--workers`, `--ray-address`, `--gpus-per-task` of a build."""

    kind: str = "local"
    workers: int = 1
    ray_address: str | None = None
    gpus_per_task: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise MmfaithError(f"--executor must be one of {', '.join(EXECUTORS)}, not {self.kind!r}.")
        if self.workers < 1:
            raise MmfaithError(f"--workers must be 1 or more, not {self.workers}.")
        if self.gpus_per_task < 0:
            raise MmfaithError(f"--gpus-per-task must be 0 or more, not {self.gpus_per_task}.")
        if self.ray_address and self.kind == "local":
            raise MmfaithError("--ray-address needs --executor ray (or auto).")


def add_executor_options(group: argparse._ArgumentGroup) -> None:
    """The executor flags every `mmfaith build FAMILY` takes (`--workers` included)."""
    group.add_argument("--workers", type=int, default=1,
                       help="local worker processes, one library thread each (--executor local; or the CPUs of a "
                            "Ray instance started here)")
    group.add_argument("--executor", choices=EXECUTORS, default="local",
                       help="where work units run: this machine's pool (default), a Ray cluster, or auto (a "
                            "running Ray cluster when there is one, else the pool); docs/scale.md")
    group.add_argument("--ray-address", metavar="ADDR",
                       help="Ray cluster to join (host:port, ray://host:10001, or auto); default: start Ray here")
    group.add_argument("--gpus-per-task", type=float, default=0.0, metavar="SHARE",
                       help="GPU share each Ray task asks for (LaMa on GPUs: e.g. 0.25 runs four units per GPU)")


def executor_choice(args: argparse.Namespace) -> ExecutorChoice:
    return ExecutorChoice(args.executor, args.workers, args.ray_address, args.gpus_per_task)


def choice_for(executor: ExecutorChoice | None, workers: int) -> ExecutorChoice:
    """A build request's executor: the one it names, else the local pool of `workers` processes."""
    return executor if executor is not None else ExecutorChoice("local", workers)


def open_executor(choice: ExecutorChoice, reads: Iterable[Path], writes: Iterable[Path]) -> Executor:
    """The workers of a build; with Ray, every node is first checked to read `reads` and write `writes`."""
    if choice.kind == "local":
        return WorkerPool(choice.workers)
    from mmfaith.builders.ray_pool import RayPool, no_cluster

    if choice.kind == "auto" and (importlib.util.find_spec("ray") is None or no_cluster(choice.ray_address)):
        return WorkerPool(choice.workers)
    address = choice.ray_address or ("auto" if choice.kind == "auto" else None)
    pool = RayPool(address, choice.workers, choice.gpus_per_task)
    try:
        pool.check_nodes(reads, writes)
    except BaseException:
        pool.close(abort=True)
        raise
    return pool


def describe_executor(pool: Executor) -> dict[str, Any]:
    """What build.json records of the executor (not part of the recipe: it never changes the bytes)."""
    if isinstance(pool, WorkerPool):
        return {"kind": "local", "workers": pool.workers}
    return {"kind": "ray", "cpus": pool.cpus, "nodes": len(pool.nodes()), "gpus_per_task": pool.gpus_per_task}
