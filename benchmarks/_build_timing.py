"""Run one `mmfaith build FAMILY` subprocess and report its throughput (shared by build_spd.py and build_vfaith.py).

Figures of one build:
- pairs made (the sum of build.json's counts.accepted), wall seconds of the build process
  (interpreter start included) and pairs/s over that wall time;
- CPU seconds (user + sys) of the build process and its joined workers (os.wait4), CPU seconds per
  pair, and `pairs/s if idle`: pairs / (CPU seconds / workers), the rate the build would reach with
  a whole core per worker. The machine is shared: other load stretches the wall time, much less the
  CPU time, so the second rate is the one to compare across runs;
- CPU seconds per stage (plan, inpaint, gates, encode) for the candidates kept and those rejected,
  and the share of the stage time spent on rejected candidates (build.json's cpu_seconds, measured
  by the workers with time.process_time);
- peak RSS of the build process.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[1]
COCO128 = REPOSITORY.parent / "shared" / "data" / "coco128"


def add_build_options(parser: argparse.ArgumentParser) -> None:
    """The options both build benchmarks take (workers, inpainter, seed, source, keep)."""
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--inpainter", default="auto", choices=("auto", "patchmatch", "telea", "ns", "lama"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--coco", type=Path, help="a COCO folder (annotations/instances_train2017.json, train2017/)")
    parser.add_argument("--embedded", action="store_true", help="use the embedded 32-image sample")
    parser.add_argument("--keep", type=Path, help="keep the build in this (new) folder")


def coco_arguments(coco: Path | None, embedded: bool) -> tuple[list[str], str]:
    """The build's source flags: `coco` (or ../shared/data/coco128 when present) unless `embedded`."""
    folder = None if embedded else (coco or COCO128)
    annotations = folder / "annotations" / "instances_train2017.json" if folder else None
    if annotations is None or not annotations.is_file():
        return [], "embedded sample"
    return ["--coco-annotations", str(annotations), "--images", str(folder / "train2017")], str(folder)


def run_build(family: str, arguments: list[str], workers: int, keep: Path | None = None) -> dict[str, Any]:
    """Build into a fresh temporary folder and measure it (module docstring); `keep` copies the build there."""
    with tempfile.TemporaryDirectory(prefix=f"{family}-bench-") as tmp:
        out = Path(tmp) / "build"
        log_path = Path(tmp) / "build.log"
        command = [sys.executable, "-m", "mmfaith", "build", family, *arguments, "--workers", str(workers),
                   "--no-progress", "--out", str(out)]
        load = os.getloadavg()[0]
        with open(log_path, "wb") as log:
            started = time.perf_counter()
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(process.pid, 0)
            wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{log_path.read_text()}")
        info = json.loads((out / "build.json").read_text(encoding="utf-8"))
        if keep is not None:
            import shutil

            shutil.copytree(out, keep)
    pairs = sum(info["counts"]["accepted"].values())
    cpu = usage.ru_utime + usage.ru_stime
    return {"family": family, "command": command[2:], "workers": workers, "pairs": pairs,
            "wall_s": round(wall, 2), "pairs_per_s": round(pairs / wall, 3), "cpu_s": round(cpu, 2),
            "cpu_s_per_pair": round(cpu / pairs, 4) if pairs else None,
            "pairs_per_s_if_idle": round(pairs / (cpu / workers), 3) if cpu else None,
            "stages": info["cpu_seconds"], "rejected_by_stage": info["counts"]["rejected_by_stage"],
            "accepted": info["counts"]["accepted"], "max_rss_mib": round(usage.ru_maxrss / 1024, 1),
            "load_average": round(load, 2)}


def print_run(run: dict[str, Any], goal: float) -> None:
    """The run's figures as plain text, ending with the goal line."""
    print(f"{run['pairs']} pairs in {run['wall_s']} s wall: {run['pairs_per_s']} pairs/s "
          f"(--workers {run['workers']}, 1-minute load {run['load_average']} at the start)")
    print(f"CPU {run['cpu_s']} s, {run['cpu_s_per_pair']} s per pair: {run['pairs_per_s_if_idle']} pairs/s with a "
          f"whole core per worker; peak RSS {run['max_rss_mib']} MiB")
    stages = run["stages"]
    print(f"{'CPU s by stage':<16} {'kept':>9} {'rejected':>9}")
    for stage in stages["accepted"]:
        print(f"{stage:<16} {stages['accepted'][stage]:>9.2f} {stages['rejected'][stage]:>9.2f}")
    share = stages["rejected_share"]
    print(f"share of the stage time spent on rejected candidates: {share:.1%}" if share is not None else
          "no stage time measured")
    print(f"rejected by stage: {run['rejected_by_stage']}")
    for label, rate in (("wall", run["pairs_per_s"]), ("whole core per worker", run["pairs_per_s_if_idle"] or 0.0)):
        print(f"goal: >= {goal} pairs/s ({label}): {rate} -> {'MET' if rate >= goal else 'NOT MET'}")
