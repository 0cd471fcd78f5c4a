"""Builds on a real local Ray cluster (Ray's own cluster_utils, several nodes on 127.0.0.1), no mocks.

The driver is `mmfaith build` as a user runs it (`--executor ray --ray-address ADDR`); the work
units run as Ray tasks on the cluster's nodes. Every build is compared byte for byte with the
local build of the same arguments (the session's `mixed_build`).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import read_records
from tests.spd_faith.test_build_journal import tree_bytes

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'mmfaith[ray]')")
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = pytest.mark.e2e  # long: the test command runs it first (tests/conftest.py)

VFAITH_ARGS = ["--per-template", "4", "--inpainter", "patchmatch", "--seed", "0", "--no-progress"]  # = vfaith_build's
MIXED_ARGS = ["--per-tier", "2", "--multi", "4", "--controls", "2", "--seed", "0", "--inpainter", "telea", "--no-progress"]


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A head that runs no work (0 CPUs) and two worker nodes of one CPU each."""
    made = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        made.add_node(num_cpus=1)
        made.add_node(num_cpus=1)
        made.wait_for_nodes()
        yield made
    finally:
        made.shutdown()


def _build(out: Path, address: str, *extra: str, family: str = "spd-faith") -> subprocess.Popen:
    arguments = MIXED_ARGS if family == "spd-faith" else VFAITH_ARGS
    return subprocess.Popen([sys.executable, "-m", "mmfaith", "build", family, "--out", str(out), *arguments,
                             "--executor", "ray", "--ray-address", address, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _same_tree(expected: Path, got: Path) -> None:
    reference, built = tree_bytes(expected), tree_bytes(got)
    assert reference.keys() == built.keys()
    assert [name for name in reference if reference[name] != built[name]] == []


def test_a_build_on_two_nodes_is_byte_identical_to_the_local_build(cluster: Cluster, mixed_build: Path,
                                                                    tmp_path: Path) -> None:
    process = _build(tmp_path / "out", cluster.address)
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr.decode()
    _same_tree(mixed_build, tmp_path / "out")
    assert not (tmp_path / "out" / ".staging").exists()


def test_a_vfaith_build_on_two_nodes_is_byte_identical_to_the_local_build(
        cluster: Cluster, vfaith_build: Path, removable_sample: tuple[Path, Path], tmp_path: Path) -> None:
    annotations, images = removable_sample  # vfaith_build's source
    process = _build(tmp_path / "out", cluster.address, "--coco-annotations", str(annotations),
                     "--images", str(images), family="vfaith")
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr.decode()
    _same_tree(vfaith_build, tmp_path / "out")


def test_a_node_removed_mid_build_leaves_a_complete_identical_build(cluster: Cluster, mixed_build: Path,
                                                                   tmp_path: Path) -> None:
    out = tmp_path / "out"
    process = _build(out, cluster.address)
    deadline = time.monotonic() + 300
    while len(read_records(out)) < 2 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, "the build finished before a node could be removed"
    cluster.remove_node(cluster.list_all_nodes()[1], allow_graceful=False)  # a worker node dies, with its tasks
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr.decode()
    _same_tree(mixed_build, out)


def _unshare_works() -> bool:
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    return shutil.which("unshare") is not None and probe.returncode == 0


def test_a_node_that_cannot_see_the_output_folder_is_named_in_one_line(cluster: Cluster, tmp_path: Path) -> None:
    if not _unshare_works():
        pytest.skip("needs `unshare -m` (a private mount namespace) to start a node that cannot see --out")
    shared = tmp_path / "shared"
    out = shared / "out"
    shared.mkdir()
    ray_cli = Path(sys.executable).parent / "ray"
    # A third node in its own mount namespace, where a fresh tmpfs hides the folder that holds --out:
    # as on a cluster whose node lacks the shared mount.
    node = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c",
                             f'mount -t tmpfs tmpfs "{shared}" && exec "{ray_cli}" start --address={cluster.address} '
                             "--num-cpus=1 --block"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        ray.init(address=cluster.address)
        try:
            deadline = time.monotonic() + 60
            while sum(1 for n in ray.nodes() if n["Alive"]) < 4 and time.monotonic() < deadline:
                time.sleep(0.2)
            known = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        finally:
            ray.shutdown()
        assert len(known) == 4, "the namespaced node did not join"
        process = _build(out, cluster.address)
        _, stderr = process.communicate(timeout=300)
        message = stderr.decode().strip()
        assert process.returncode != 0
        assert message.count("\n") == 0, message
        assert f"cannot write into {out}" in message and "Ray node" in message
        assert not read_records(out)
    finally:
        os.killpg(node.pid, 9)
        node.wait()
