"""Build tasks as Ray tasks on a cluster, with the interface of the local WorkerPool.

The driver (the `mmfaith build` process) keeps the plan and the journal; only the work units run
here. Each unit is one Ray task asking for one CPU (and `gpus_per_task` of a GPU when the unit
runs LaMa or Sentence-BERT), with one library thread, as in the local pool. A task whose worker or
node dies is retried by Ray on another node (`max_retries`); units are pure functions of their
argument (they write only into their own staging folder, builders/staging.py), so a retry gives
the same bytes. The window keeps twice the cluster's CPUs in flight.

`check_nodes` runs a probe pinned to every alive node before any unit: each must read the source
paths and write into --out (a shared filesystem); the first that cannot is named in one error.
"""
from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from mmfaith.builders.worker_pool import pin_worker_threads
from mmfaith.errors import MmfaithError

INSTALL_HINT = "pip install 'mmfaith[ray]'"
MAX_RETRIES = 5


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise MmfaithError(f"--executor ray needs Ray: {INSTALL_HINT}.") from exc
    return ray


def _run_unit(function: Callable[[Any], Any], argument: Any) -> Any:
    pin_worker_threads()
    return function(argument)


def _probe_paths(reads: Sequence[str], writes: Sequence[str]) -> str | None:
    """On one node: None when every `reads` path exists and every `writes` folder takes a file; else why not."""
    for path in reads:
        if not os.path.exists(path):
            return f"cannot see {path}"
    for folder in writes:
        probe = Path(folder) / f".mmfaith-node-check-{uuid.uuid4().hex}"
        try:
            probe.write_bytes(b"ok")
            probe.unlink()
        except OSError as exc:
            return f"cannot write into {folder} ({exc.strerror or exc})"
    return None


def no_cluster(address: str | None) -> bool:
    """True when no Ray cluster answers at `address` (None: RAY_ADDRESS or one started on this machine)."""
    ray = _ray()
    try:
        ray.init(address=address or "auto", log_to_driver=False, logging_level=logging.ERROR)
    except ConnectionError:
        return True
    ray.shutdown()
    return False


class _RayPending:
    def __init__(self, ray: Any, ref: Any) -> None:
        self._ray, self._ref = ray, ref

    def get(self) -> Any:
        return self._ray.get(self._ref)


class RayPool:
    """Work units as Ray tasks: `submit(function, argument).get()`, `map`, `window`, `close`.

    `address`: a cluster to join ("auto" for the one running on this machine or named by
    RAY_ADDRESS); None starts a Ray instance in this process with `workers` CPUs (for trying Ray
    on one machine). `function` must be importable by name on every node (a module-level function
    of mmfaith), as for the spawn pool.
    """

    def __init__(self, address: str | None, workers: int, gpus_per_task: float = 0.0) -> None:
        ray = self._ray = _ray()
        options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
        if address is None:
            options.update(num_cpus=workers, include_dashboard=False)
        try:
            ray.init(address=address, **options)
        except ConnectionError as exc:
            raise MmfaithError(f"no Ray cluster at {address}: {exc}; start one with `ray start --head` or leave "
                               "--ray-address out to start Ray on this machine.") from exc
        self._unit = ray.remote(_run_unit).options(num_cpus=1, num_gpus=gpus_per_task, max_retries=MAX_RETRIES)
        self.gpus_per_task = gpus_per_task

    @property
    def cpus(self) -> int:
        return int(self._ray.cluster_resources().get("CPU", 1))

    @property
    def window(self) -> int:
        """Twice the cluster's CPUs: every worker busy while the driver journals results."""
        return 2 * max(1, self.cpus)

    def nodes(self) -> list[dict[str, Any]]:
        """The alive nodes that run CPU work (Ray's node records)."""
        return [node for node in self._ray.nodes() if node.get("Alive") and node.get("Resources", {}).get("CPU")]

    def check_nodes(self, reads: Iterable[Path], writes: Iterable[Path]) -> None:
        """MmfaithError naming the first node that cannot read `reads` or write into `writes`."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        reads, writes = [str(p) for p in reads], [str(p) for p in writes]
        probe = self._ray.remote(_probe_paths)
        nodes = self.nodes()
        refs = [probe.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False))
                .remote(reads, writes) for node in nodes]
        for node, problem in zip(nodes, self._ray.get(refs)):
            if problem is not None:
                raise MmfaithError(f"Ray node {node['NodeManagerAddress']} (node id {node['NodeID'][:12]}) {problem}; "
                                   "every node must see the source and --out at the same paths (a shared filesystem).")

    def submit(self, function: Callable[[Any], Any], argument: Any) -> _RayPending:
        return _RayPending(self._ray, self._unit.remote(function, argument))

    def map(self, function: Callable[[Any], Any], arguments: Iterable[Any]) -> list[Any]:
        return self._ray.get([self._unit.remote(function, argument) for argument in arguments])

    def close(self, abort: bool = False) -> None:
        """Disconnect from the cluster (a Ray instance this process started stops with it)."""
        self._ray.shutdown()
