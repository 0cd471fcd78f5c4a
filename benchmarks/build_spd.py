"""Throughput of `mmfaith build spd-faith`: pairs/s, CPU seconds per stage, share spent on rejected candidates.

One build (a fresh `python -m mmfaith build spd-faith ... --no-progress` subprocess into a fresh
temporary folder, nothing cached between runs): by default the paper mix of the 128-image COCO
sample ../shared/data/coco128 when it is there (else the embedded 32-image sample), `--paper-mix
200 --controls 10 --workers 2`, the default inpainter (`auto`: PatchMatch when patchmatch-cython
imports). It prints the figures of benchmarks/_build_timing.py: pairs/s over the wall time, CPU
seconds per pair and the rate with a whole core per worker (the machine is shared: compare that
one across runs), CPU seconds per stage (plan, inpaint, gates, encode) of kept and rejected
candidates and the rejected share, and the goal line (issue 32: >= 8 pairs/s on 2 workers).

    python benchmarks/build_spd.py                                # the default build above
    python benchmarks/build_spd.py --paper-mix 600 --controls 30  # the issue's build
    python benchmarks/build_spd.py --inpainter telea --quick      # 40 pairs of the embedded sample

It prints a plain-text summary, then one line `JSON {...}` holding every figure.
"""
from __future__ import annotations

import argparse
import json
import sys

from _build_timing import add_build_options, coco_arguments, print_run, run_build

GOAL_PAIRS_PER_S = 8.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paper-mix", type=int, default=200, metavar="N")
    parser.add_argument("--controls", type=int, default=10, metavar="N")
    parser.add_argument("--quick", action="store_true", help="40 pairs of the embedded sample: a smoke test")
    add_build_options(parser)
    args = parser.parse_args(argv)
    pairs, controls = (40, 0) if args.quick else (args.paper_mix, args.controls)
    source, source_name = coco_arguments(args.coco, args.embedded or args.quick)
    run = run_build("spd-faith", [*source, "--paper-mix", str(pairs), "--controls", str(controls),
                                  "--inpainter", args.inpainter, "--seed", str(args.seed)], args.workers, args.keep)
    print(f"SPD-Faith --paper-mix {pairs} --controls {controls} of {source_name}, --inpainter {args.inpainter}")
    print_run(run, GOAL_PAIRS_PER_S)
    print("JSON " + json.dumps({**run, "source": source_name, "goal_pairs_per_s": GOAL_PAIRS_PER_S}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
