"""Throughput of `mmfaith build vfaith` (offline, from COCO annotations): pairs/s, CPU seconds per stage,
share spent on rejected candidates, and the rejections' most common reasons.

One build (a fresh `python -m mmfaith build vfaith ... --no-progress` subprocess into a fresh
temporary folder): by default 100 pairs (25 per template) of ../shared/data/coco128 when it is
there (else the embedded 32-image sample, which has too few relation questions for 25),
`--workers 2`, the default inpainter (`auto`: PatchMatch when patchmatch-cython imports). It prints
the figures of benchmarks/_build_timing.py (pairs/s over the wall time, CPU seconds per pair and
the rate with a whole core per worker, CPU seconds per stage of kept and rejected candidates, the
rejected share), the goal line (issue 32: >= 4 pairs/s on 2 workers), the top rejection reasons
and the gold-letter balance.

    python benchmarks/build_vfaith.py                                 # 100 pairs, --workers 2
    python benchmarks/build_vfaith.py --workers 1 --keep /tmp/vf100   # keep the build for a look
    python benchmarks/build_vfaith.py --quick                         # 5 per template, embedded sample

It prints a plain-text summary, then one line `JSON {...}` holding every figure.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

from _build_timing import add_build_options, coco_arguments, print_run, run_build

GOAL_PAIRS_PER_S = 4.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-template", type=int, default=25)
    parser.add_argument("--per-image", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="5 pairs per template of the embedded sample")
    add_build_options(parser)
    args = parser.parse_args(argv)
    per_template = 5 if args.quick else args.per_template
    source, source_name = coco_arguments(args.coco, args.embedded or args.quick)
    scratch = Path(tempfile.mkdtemp(prefix="vfaith-bench-keep-"))
    try:
        kept = args.keep or scratch / "build"
        run = run_build("vfaith", [*source, "--per-template", str(per_template), "--per-image", str(args.per_image),
                                   "--inpainter", args.inpainter, "--seed", str(args.seed)], args.workers, kept)
        reasons = Counter()
        for line in (kept / "rejected.jsonl").read_text(encoding="utf-8").splitlines():
            rejection = json.loads(line)
            reasons[f"{rejection['stage']}: {rejection['reason'].split(':')[0].split('(')[0].strip()[:70]}"] += 1
        letters = json.loads((kept / "build.json").read_text(encoding="utf-8"))["gold_letter_counts"]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"VFaith --per-template {per_template} of {source_name}, --inpainter {args.inpainter}: {run['accepted']}")
    print_run(run, GOAL_PAIRS_PER_S)
    for reason, count in reasons.most_common(8):
        print(f"  {count:4d}  {reason}")
    print(f"gold letters: {letters}")
    print("JSON " + json.dumps({**run, "source": source_name, "goal_pairs_per_s": GOAL_PAIRS_PER_S,
                                "top_rejection_reasons": dict(reasons.most_common(8)), "gold_letters": letters},
                               sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
