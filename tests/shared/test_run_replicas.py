"""A run over two replicas of the reference server, one of which dies mid-run (real HTTP, no mocks)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.evaluators.spd_faith.score import ScoreRequest, score_spd_faith
from mmfaith.loaders.spd_faith.dataset import open_spd_dataset

from tests.conftest import free_port
from tests.shared.test_reference_server import prediction_lines

MODEL = "pixel-diff"  # not a perfect model: its metrics are not all 1, so equal metrics mean equal answers


def _run(build: Path, out: Path, *urls: str) -> subprocess.Popen:
    replicas = [arg for url in urls for arg in ("--base-url", url)]
    return subprocess.Popen([sys.executable, "-m", "mmfaith", "run", "spd-faith", "--dataset", str(build), "--model",
                             MODEL, *replicas, "--out", str(out), "--concurrency", "4", "--timeout", "5",
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _metrics(build: Path, run_dir: Path, out: Path) -> dict[str, Any]:
    metrics = score_spd_faith(ScoreRequest(dataset=build, predictions=run_dir / "predictions.jsonl", out=out,
                                           from_run=True, n_bootstrap=50))
    return {key: value for key, value in metrics.items() if key != "provenance"}


def _serve(build: Path) -> tuple[subprocess.Popen, str]:
    """A reference-server replica in its own process (so it can be killed like a crashed server)."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "mmfaith", "serve-reference", "--model", MODEL, "--dataset",
                                str(build), "--port", str(port), "--latency", "0.05"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, url
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the reference server did not start")


def test_a_replica_killed_mid_run_loses_nothing_and_answers_nothing_twice(mixed_build: Path, tmp_path: Path) -> None:
    dataset = open_spd_dataset(mixed_build)
    with ReferenceServer(dataset, MODEL, family="spd-faith", latency_s=0.05) as single:
        process = _run(mixed_build, tmp_path / "single", single.base_url)
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr.decode()

    survivor, survivor_url = _serve(mixed_build)
    doomed, doomed_url = _serve(mixed_build)
    try:
        out = tmp_path / "two"
        process = _run(mixed_build, out, survivor_url, doomed_url)
        predictions = out / "predictions.jsonl"
        deadline = time.monotonic() + 120
        while (not predictions.exists() or predictions.read_bytes().count(b"\n") < 8) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert process.poll() is None, "the run finished before a replica could be killed"
        os.killpg(doomed.pid, signal.SIGKILL)  # a crashed server: open connections reset, the port refuses
        doomed.wait()
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr.decode()
    finally:
        for server in (survivor, doomed):
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()

    lines = prediction_lines(out)
    per_call = Counter((line["id"], line["probe"]) for line in lines)
    expected = {(pair.id, probe) for pair in dataset.items for probe in ("same", "different", "count", "describe")}
    assert set(per_call) == expected and set(per_call.values()) == {1}  # every call answered, none twice
    assert all(line["response"] is not None for line in lines)
    replicas = {r["server"]: r for r in json.loads((out / "run.json").read_text())["sessions"][-1]["replicas"]}
    dead, alive = replicas[doomed_url], replicas[survivor_url]
    assert dead["answered"] > 0 and dead["errors"].get("connection", 0) >= 1 and dead["times_taken_out"] >= 1
    assert dead["answered"] + alive["answered"] == len(lines)  # each line answered by exactly one replica
    assert alive["answered"] > dead["answered"]
    assert _metrics(mixed_build, out, tmp_path / "s2") == _metrics(mixed_build, tmp_path / "single", tmp_path / "s1")
