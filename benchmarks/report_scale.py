"""`mmfaith report` at scale: seconds, CPU seconds and peak RSS over two score dirs, by item count.

Reads the oracle and always-A score dirs that `benchmarks/score_scale.py --keep-scores` keeps under its
--work folder (WORK/FAMILY/SIZE/{oracle,always-a}). With `--copies K`, each score dir is first copied K times
into WORK/FAMILY/SIZExK/: items.jsonl's lines repeated K times, copy k's ids made fresh as score_scale.py makes
them (the id's prefix and 16 hex digits of sha256(id, k)), metrics.json as it is. The copies are what
`score` writes for a build of K times as many items (the items of a replicated build are the small build's
items with fresh ids) but for metrics.json's counts, which `report` only prints: a million-item `report`
measured without two million-item scores. The report runs as `python -m mmfaith report ... --no-explorer` with
the PYTHONPATH given (`--code`, default: this checkout), so two versions are measured on the same score dirs.

    python benchmarks/report_scale.py --work /tmp/scale --families vfaith --size 100000
    python benchmarks/report_scale.py --work /tmp/scale --families vfaith --size 100000 --copies 10 --code /old /new
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from score_scale import _fresh_id  # benchmarks/ is this script's folder, first on sys.path

MODELS = ("oracle", "always-a")


def _copy_score_dir(source: Path, target: Path, copies: int) -> None:
    """`source`'s metrics.json, and its items.jsonl `copies` times with fresh ids (module docstring)."""
    target.mkdir(parents=True)
    shutil.copy(source / "metrics.json", target / "metrics.json")
    with open(target / "items.jsonl", "w", encoding="utf-8") as out:
        for copy in range(copies):
            with open(source / "items.jsonl", encoding="utf-8") as lines:
                for line in lines:
                    item_id = json.loads(line)["id"]
                    out.write(line.replace(f'"id":"{item_id}"', f'"id":"{_fresh_id(item_id, copy)}"', 1))


def _measured(code: str, *args: str) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds (user + system), peak RSS in MB: the largest of the process and its waited-for
    workers) of one `mmfaith` command run with PYTHONPATH `code`."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "mmfaith", *args], stdout=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONPATH": code})
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"mmfaith {' '.join(args)} failed")
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="score_scale.py's --work folder (kept scores)")
    parser.add_argument("--families", nargs="+", required=True)
    parser.add_argument("--size", type=int, required=True, help="the kept scores' size (the SIZE folder)")
    parser.add_argument("--copies", type=int, default=1, help="report over copies of that many times the items")
    parser.add_argument("--code", nargs="+", default=[str(Path(__file__).resolve().parent.parent)],
                        help="PYTHONPATH of each version measured (default: this checkout)")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--keep", action="store_true", help="keep the copies and reports (default: removed)")
    args = parser.parse_args()
    print(f"{'family':<10} {'lines':>10} {'code':<36} {'report':>28}", flush=True)
    for name in args.families:
        folder = args.work / name / str(args.size)
        if args.copies > 1:
            folder = args.work / name / f"{args.size}x{args.copies}"
            shutil.rmtree(folder, ignore_errors=True)
            for model in MODELS:
                _copy_score_dir(args.work / name / str(args.size) / model, folder / model, args.copies)
        lines = sum(1 for _ in open(folder / "oracle" / "items.jsonl", "rb"))
        for k, code in enumerate(args.code):
            out = folder / f"report-{k}"
            seconds, cpu, mb = _measured(code, "report", *(str(folder / model) for model in MODELS), "--out", str(out),
                                         "--bootstrap", str(args.bootstrap), "--no-explorer")
            print(f"{name:<10} {lines:>10,} {code[-36:]:<36} {seconds:6.1f} s ({cpu:5.1f} cpu) {mb:6.0f} MB", flush=True)
            if not args.keep:
                shutil.rmtree(out, ignore_errors=True)
        if args.copies > 1 and not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
