"""Throughput and rejections of `mmfaith build vfaith` (offline, from COCO annotations).

Each build is a fresh `python -m mmfaith build vfaith ... --no-progress` subprocess writing into a
fresh temporary directory. It reports, per build: the pairs made (per template), the wall time and
pairs per second (pairs made over the build process's wall time, interpreter start included), the
CPU seconds of the process and its workers, the rejections by stage and their most common reasons,
and the gold-letter balance of the original and edited answers; then the paths of the first pairs'
images for a look by eye (`--keep DIR` keeps the build).

Default: a 100-pair build (25 per template) of ../shared/data/coco128 (128 COCO images) when it is
there, else of the embedded 32-image sample (which has too few relation questions for 25).

    python benchmarks/build_vfaith.py                          # 100 pairs, --workers 1
    python benchmarks/build_vfaith.py --workers 2 --keep /tmp/vf100
    python benchmarks/build_vfaith.py --per-template 5 --embedded   # a quick run on the embedded sample

It prints a plain-text summary, then one line `JSON {...}` holding every figure.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

COCO128 = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "coco128"


def _build(out: Path, args: argparse.Namespace) -> dict:
    command = [sys.executable, "-m", "mmfaith", "build", "vfaith", "--out", str(out), "--per-template",
               str(args.per_template), "--per-image", str(args.per_image), "--workers", str(args.workers),
               "--inpainter", args.inpainter, "--seed", str(args.seed), "--no-progress"]
    source = None if args.embedded else (args.coco or COCO128)
    if source is not None and (source / "annotations" / "instances_train2017.json").is_file():
        command += ["--coco-annotations", str(source / "annotations" / "instances_train2017.json"),
                    "--images", str(source / "train2017")]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"build failed ({done.returncode}): {done.stderr.strip()}")
    info = json.loads((out / "build.json").read_text())
    made = sum(info["counts"]["accepted"].values())
    reasons = Counter()
    for line in (out / "rejected.jsonl").read_text().splitlines():
        rejection = json.loads(line)
        reasons[f"{rejection['stage']}: {rejection['reason'].split(':')[0].split('(')[0].strip()[:70]}"] += 1
    return {"source": info["source"]["dataset"], "pairs": made, "per_template": info["counts"]["accepted"],
            "wall_s": round(wall, 2), "pairs_per_s": round(made / wall, 3),
            "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
            "rejected_by_stage": info["counts"]["rejected_by_stage"], "top_rejection_reasons": dict(reasons.most_common(8)),
            "gold_letters": info["gold_letter_counts"], "skipped_images": info["counts"]["skipped_images"],
            "workers": args.workers, "inpainter": args.inpainter, "load_average": os.getloadavg()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-template", type=int, default=25)
    parser.add_argument("--per-image", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--inpainter", default="patchmatch", choices=("patchmatch", "telea"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--coco", type=Path, help="a COCO folder (annotations/instances_train2017.json, train2017/)")
    parser.add_argument("--embedded", action="store_true", help="use the embedded 32-image sample")
    parser.add_argument("--keep", type=Path, help="keep the build in this (new) folder")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="vfaith-bench-"))
    try:
        out = folder / "build"
        figures = _build(out, args)
        print(f"{figures['pairs']} pairs {figures['per_template']} from {figures['source']} in {figures['wall_s']} s: "
              f"{figures['pairs_per_s']} pairs/s ({figures['cpu_s']} CPU s; --workers {args.workers}, "
              f"{args.inpainter}; load {figures['load_average'][0]:.2f})")
        print(f"rejected by stage: {figures['rejected_by_stage']}")
        for reason, count in figures["top_rejection_reasons"].items():
            print(f"  {count:4d}  {reason}")
        print(f"gold letters: {figures['gold_letters']}")
        if args.keep:
            shutil.copytree(out, args.keep)
            print(f"kept in {args.keep} (look at preview.png and images/edited/)")
        print("JSON " + json.dumps(figures, sort_keys=True))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
