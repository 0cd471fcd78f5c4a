"""Throughput and peak-memory benchmark of `mmfaith build spd-faith` on the embedded COCO sample.

What it measures (every build is a fresh `python -m mmfaith build spd-faith ... --no-progress`
subprocess writing into a fresh temporary directory, so nothing is cached between runs):

1. Pairs per second for each inpainter (telea, patchmatch: the classical smear and the textured
   default) x each edit type (color, remove, position,
   restricted with --edit-types), single process (--workers 1) and --workers 2, and the ratio
   workers2 / workers1. Then a small mixed run (all edit types, telea), and the headline per
   inpainter: a 100-pair --paper-mix build, single vs --workers 2 (large enough that the rate is the build's
   rate, not the ~0.8 s of interpreter and worker start-up that a few-second run is dominated by). The rate is the pairs actually made (the sum of build.json's
   counts.accepted) over the wall time of the build process; on this small sample position-only
   builds cannot fill the easy tier, so they make fewer pairs than asked. Each row also gives the
   CPU seconds (user + sys) of the build process and its joined workers, and the run prints the
   machine's load average: other load slows these runs, --workers 2 the most.
2. Peak memory (max RSS of the build process itself, from os.wait4) of single-process builds of
   20 and of 200 pairs (--paper-mix, PatchMatch), and their ratio.
3. An estimate of a 3,000-pair --paper-mix build on 2 cores (--workers 2) per inpainter: 3,000
   over the headline build's --workers 2 rate (the embedded sample's images, 640 px; larger
   images fill more slowly with PatchMatch, whose cost grows with the hole and the image).

Goals:
- `--workers 2` reaches at least 1.7x the single-process rate of the 100-pair build on 2 cores.
- Peak memory does not grow with the number of pairs (images stream through the build): the
  200-pair build peaks within 1.25x of the 20-pair build.

Run it from the repository root, in the environment where mmfaith is installed:

    python benchmarks/build_spd.py                 # full run, a few minutes on 2 cores
    python benchmarks/build_spd.py --quick         # smaller counts, a smoke test
    python benchmarks/build_spd.py --repeat 3 --out-json spd_bench.json

It prints a plain-text table, then one line `JSON {...}` holding every figure.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

INPAINTERS = ("telea", "patchmatch")
ESTIMATE_PAIRS = 3000
EDIT_TYPES = ("color", "remove", "position")
WORKER_COUNTS = (1, 2)
SPEEDUP_GOAL = 1.7
MEMORY_GROWTH_LIMIT = 1.25


@dataclass(frozen=True)
class Counts:
    """How many pairs each kind of measured build asks for."""

    per_tier_one_type: int
    mixed_per_tier: int
    mixed_multi: int
    headline_paper_mix: int
    memory_small: int
    memory_large: int


FULL = Counts(per_tier_one_type=4, mixed_per_tier=6, mixed_multi=8, headline_paper_mix=100, memory_small=20,
              memory_large=200)
QUICK = Counts(per_tier_one_type=2, mixed_per_tier=2, mixed_multi=4, headline_paper_mix=20, memory_small=10,
               memory_large=40)


@dataclass(frozen=True)
class BuildRun:
    """One finished build subprocess: wall time, CPU time (its workers included), pairs made, peak RSS."""

    seconds: float
    cpu_seconds: float
    pairs: int
    max_rss_mib: float

    @property
    def rate(self) -> float:
        return self.pairs / self.seconds


def run_build(build_args: list[str]) -> BuildRun:
    """Run one build in a fresh temporary directory and measure it."""
    with tempfile.TemporaryDirectory(prefix="spd-bench-") as tmp:
        out = Path(tmp) / "build"
        log_path = Path(tmp) / "build.log"
        command = [sys.executable, "-m", "mmfaith", "build", "spd-faith", *build_args,
                   "--no-progress", "--out", str(out)]
        with open(log_path, "wb") as log:
            started = time.perf_counter()
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(process.pid, 0)
            seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {process.returncode}:\n{log_path.read_text()}")
        counts = json.loads((out / "build.json").read_text(encoding="utf-8"))["counts"]
        return BuildRun(seconds, usage.ru_utime + usage.ru_stime, sum(counts["accepted"].values()),
                        usage.ru_maxrss / 1024)


def best_of(build_args: list[str], repeat: int) -> BuildRun:
    """The fastest of `repeat` identical builds (pairs made are the same every time)."""
    return min((run_build(build_args) for _ in range(repeat)), key=lambda run: run.seconds)


def worker_pair(build_args: list[str], repeat: int) -> dict[str, float]:
    """The same build single-process and with --workers 2, and the speedup."""
    runs = {workers: best_of([*build_args, "--workers", str(workers)], repeat) for workers in WORKER_COUNTS}
    single, double = runs[1], runs[2]
    return {
        "pairs": single.pairs,
        "seconds_w1": round(single.seconds, 3), "cpu_w1": round(single.cpu_seconds, 3), "rate_w1": round(single.rate, 3),
        "seconds_w2": round(double.seconds, 3), "cpu_w2": round(double.cpu_seconds, 3), "rate_w2": round(double.rate, 3),
        "speedup": round(double.rate / single.rate, 3),
    }


def throughput(counts: Counts, repeat: int) -> dict[str, dict[str, float]]:
    """Rates per inpainter x edit type, then the mixed headline run, keyed 'inpainter/type'."""
    rows = {}
    for inpainter in INPAINTERS:
        for edit_type in EDIT_TYPES:
            build_args = ["--per-tier", str(counts.per_tier_one_type), "--edit-types", edit_type,
                          "--inpainter", inpainter]
            rows[f"{inpainter}/{edit_type}"] = worker_pair(build_args, repeat)
    mixed_args = ["--per-tier", str(counts.mixed_per_tier), "--multi", str(counts.mixed_multi), "--inpainter", "telea"]
    rows["telea/mixed"] = worker_pair(mixed_args, repeat)
    for inpainter in INPAINTERS:
        rows[f"{inpainter}/paper-mix"] = worker_pair(["--paper-mix", str(counts.headline_paper_mix),
                                                      "--inpainter", inpainter], repeat)
    return rows


def estimates(rows: dict[str, dict[str, float]]) -> dict[str, float]:
    """Minutes an ESTIMATE_PAIRS-pair paper-mix build takes on 2 cores, per inpainter (headline rate)."""
    return {inpainter: round(ESTIMATE_PAIRS / rows[f"{inpainter}/paper-mix"]["rate_w2"] / 60.0, 1)
            for inpainter in INPAINTERS}


def memory(counts: Counts, repeat: int) -> dict[str, float]:
    """Peak RSS of single-process paper-mix builds of two sizes (the lowest peak of `repeat` runs)."""
    peaks = {}
    for pairs in (counts.memory_small, counts.memory_large):
        runs = [run_build(["--paper-mix", str(pairs), "--inpainter", "patchmatch", "--workers", "1"])
                for _ in range(repeat)]
        peaks[pairs] = min(run.max_rss_mib for run in runs)
    small, large = peaks[counts.memory_small], peaks[counts.memory_large]
    return {"pairs_small": counts.memory_small, "max_rss_mib_small": round(small, 1),
            "pairs_large": counts.memory_large, "max_rss_mib_large": round(large, 1),
            "ratio": round(large / small, 3)}


def print_throughput(rows: dict[str, dict[str, float]]) -> None:
    print(f"{'inpainter/type':<16} {'pairs':>5} {'s w1':>7} {'cpu w1':>7} {'pairs/s w1':>10} "
          f"{'s w2':>7} {'cpu w2':>7} {'pairs/s w2':>10} {'w2/w1':>6}")
    for name, row in rows.items():
        print(f"{name:<16} {row['pairs']:>5} {row['seconds_w1']:>7.2f} {row['cpu_w1']:>7.2f} {row['rate_w1']:>10.2f} "
              f"{row['seconds_w2']:>7.2f} {row['cpu_w2']:>7.2f} {row['rate_w2']:>10.2f} {row['speedup']:>6.2f}")


def print_memory(mem: dict[str, float]) -> None:
    print(f"peak RSS, --paper-mix {mem['pairs_small']}: {mem['max_rss_mib_small']:.1f} MiB; "
          f"--paper-mix {mem['pairs_large']}: {mem['max_rss_mib_large']:.1f} MiB; ratio {mem['ratio']:.2f}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="take the best of N runs of each build (default 1)")
    parser.add_argument("--quick", action="store_true", help="smaller counts: a smoke test, not a measurement")
    parser.add_argument("--out-json", type=Path, metavar="PATH", help="also save the figures as JSON here")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be 1 or more")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    counts = QUICK if args.quick else FULL
    load_before = os.getloadavg()[0]
    rows = throughput(counts, args.repeat)
    mem = memory(counts, args.repeat)
    load_after = os.getloadavg()[0]
    headline = min(rows[f"{inpainter}/paper-mix"]["speedup"] for inpainter in INPAINTERS)
    minutes = estimates(rows)
    speedup_met = headline >= SPEEDUP_GOAL
    memory_flat = mem["ratio"] <= MEMORY_GROWTH_LIMIT
    print(f"SPD-Faith build on the embedded COCO sample; {os.cpu_count()} CPUs; best of {args.repeat}"
          f"{' (quick counts)' if args.quick else ''}; 1-minute load average {load_before:.2f} before, "
          f"{load_after:.2f} after (other load on the machine slows the runs, --workers 2 the most)")
    print("s: wall seconds; cpu: user+sys seconds of the build process and its workers; pairs/s: pairs made / s")
    print_throughput(rows)
    print(f"estimated {ESTIMATE_PAIRS:,}-pair --paper-mix build, --workers 2 on 2 cores: "
          + ", ".join(f"{inpainter} {value} min" for inpainter, value in minutes.items()))
    print(f"goal: --workers 2 >= {SPEEDUP_GOAL}x single process (paper-mix builds, the lower): {headline:.2f}x -> "
          f"{'MET' if speedup_met else 'NOT MET'}")
    print_memory(mem)
    print(f"goal: peak memory flat in the number of pairs (ratio <= {MEMORY_GROWTH_LIMIT}): "
          f"{'MET' if memory_flat else 'NOT MET'}")
    figures = {"cpus": os.cpu_count(), "load_average_before": load_before, "load_average_after": load_after,
               "repeat": args.repeat, "quick": args.quick, "counts": asdict(counts),
               "throughput": rows, "estimate_minutes": {"pairs": ESTIMATE_PAIRS, **minutes}, "speedup_goal": SPEEDUP_GOAL, "speedup_met": speedup_met,
               "memory": mem, "memory_growth_limit": MEMORY_GROWTH_LIMIT, "memory_flat": memory_flat}
    if args.out_json is not None:
        args.out_json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print("JSON " + json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
