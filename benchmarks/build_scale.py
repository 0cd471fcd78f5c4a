"""Build throughput by executor and worker count: the local pool against Ray, and Ray's overhead.

Builds one SPD-Faith paper-mix set (default 1,000 pairs, Telea, seed 0) from the embedded COCO
sample with `mmfaith build spd-faith` as a user runs it, once per (executor, workers): the local
pool and a Ray instance started by the build with that many CPUs, at 1, 2, 4, ... workers up to
this machine's cores. 1,000 pairs from 128 images means every image is visited several times:
each quota's slot stream walks the images in a seeded order, up to 12 visits, and a visit draws
other objects and edits, so the work per pair is that of a real build.

Prints, per run: pairs made, wall seconds of the build (build.json's own clock: process start-up
and imports excluded), pairs/s, and whether the files are byte-identical to the first run's; then
Ray's overhead against the pool at equal workers ((ray s / pool s) - 1; goal: within 10 %).

    python benchmarks/build_scale.py                      # 1,000 pairs, 1..cores workers, both executors
    python benchmarks/build_scale.py --pairs 200 --workers 1 2 --executors local
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _worker_counts(cores: int) -> list[int]:
    counts, count = [], 1
    while count < cores:
        counts.append(count)
        count *= 2
    return counts + [cores]


def _tree_digest(root: Path) -> str:
    """One hash over every file of a build except build.json (the one file that holds times)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "build.json"):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _build(out: Path, pairs: int, executor: str, workers: int) -> tuple[int, float, float]:
    """(pairs made, build seconds by build.json, wall seconds with start-up) of one CLI build."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mmfaith", "build", "spd-faith", "--out", str(out), "--paper-mix",
                    str(pairs), "--inpainter", "telea", "--seed", "0", "--executor", executor, "--workers",
                    str(workers), "--no-progress"], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    build = json.loads((out / "build.json").read_text())
    return sum(build["counts"]["accepted"].values()), float(build["seconds"]), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--workers", type=int, nargs="+", default=None, help="default: 1, 2, 4, ... up to the cores")
    parser.add_argument("--executors", nargs="+", default=["local", "ray"], choices=["local", "ray"])
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    counts = args.workers or _worker_counts(cores)
    print(f"# {args.pairs}-pair paper-mix build, Telea, embedded sample; {cores} cores; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"{'executor':>8} {'workers':>7} {'pairs':>6} {'build s':>8} {'wall s':>7} {'pairs/s':>8}  identical")
    seconds: dict[tuple[str, int], float] = {}
    reference: str | None = None
    with tempfile.TemporaryDirectory(prefix="mmfaith-scale-") as scratch:
        for executor in args.executors:
            for workers in counts:
                out = Path(scratch) / f"{executor}-{workers}"
                made, build_s, wall_s = _build(out, args.pairs, executor, workers)
                digest = _tree_digest(out)
                reference = reference or digest
                seconds[(executor, workers)] = build_s
                print(f"{executor:>8} {workers:>7} {made:>6} {build_s:>8.1f} {wall_s:>7.1f} {made / build_s:>8.2f}  "
                      f"{'yes' if digest == reference else 'NO'}", flush=True)
    if {"local", "ray"} <= set(args.executors):
        print("# Ray's overhead against the local pool at equal workers (build seconds)")
        for workers in counts:
            overhead = seconds[("ray", workers)] / seconds[("local", workers)] - 1
            print(f"workers {workers}: {overhead:+.1%}")


if __name__ == "__main__":
    main()
