"""Every benchmark at a small size in one go, one table: figure against goal.

Each benchmark in benchmarks/ runs as its own subprocess (`python benchmarks/NAME.py ARGS`) with
the small arguments below and a time limit; its goal lines (a line of its output naming a goal)
and, where a benchmark prints none, the figures read from its closing `JSON {...}` line become the
table's rows. A benchmark that fails, runs past its limit or is missing says so in its row, and the
exit status is 1 when any did. A benchmark added to benchmarks/ but not listed here runs with
`--quick` when its --help offers it, else with no arguments.

The sizes are small so the whole run stays under 10 minutes on 2 cores: the figures are meant to
show a regression on the next run, not to replace each benchmark's own full run (see its docstring
for the sizes its goal is stated at). The machine's load shows in the header; other load slows
every figure that is a rate.

    python benchmarks/all.py                       # every benchmark (under 10 minutes on 2 cores)
    python benchmarks/all.py --only mask_speed crm_embed
    python benchmarks/all.py --list                # the benchmarks and their arguments

It prints the table, then one line `JSON {...}` with every row.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GOAL_LINE = re.compile(r"\bgoals?\b", re.I)
VERDICT = re.compile(r"\b(NOT MET|MET)\b", re.I)

Row = tuple[str, str, bool | None]
"""(figure, goal, met: None when the output does not say)."""


def _vfaith_rows(figures: dict[str, Any]) -> list[Row]:
    rate = figures.get("pairs_per_s")
    if rate is None:
        return []
    return [(f"VFaith build: {rate} pairs/s (--workers {figures.get('workers')}, {figures.get('pairs')} pairs)",
             ">= 4 pairs/s on 2 workers (issue 32)", rate >= 4 if figures.get("workers") == 2 else None)]


def _label_studio_rows(figures: dict[str, Any]) -> list[Row]:
    return [(f"Label Studio {name} of {figures['tasks']} tasks: {figures[key]} s", f"< {figures['goal_s']:g} s at 3,000",
             figures[key] < figures["goal_s"] if figures["tasks"] >= 3000 else None)
            for name, key in (("push", "push_s"), ("pull", "pull_s")) if key in figures]


@dataclass(frozen=True)
class Bench:
    """One benchmark: its script's stem, the small arguments, a time limit, and optionally how to
    read rows from its JSON figures (else its goal lines are the rows)."""

    name: str
    args: tuple[str, ...]
    limit_s: int
    rows: Callable[[dict[str, Any]], list[Row]] | None = None
    note: str = field(default="")


BENCHES = (
    Bench("mask_speed", ("--passes", "1"), 120),
    Bench("crm_embed", (), 150),
    Bench("run_throughput", ("--quick",), 120),
    Bench("build_spd", ("--quick",), 240),
    Bench("build_vfaith", ("--per-template", "3", "--embedded", "--workers", "2"), 150, _vfaith_rows),
    Bench("build_scale", ("--pairs", "40", "--workers", "2", "--executors", "local"), 150),
    Bench("score_scale", ("--sizes", "2000"), 240),
    Bench("label_studio", ("--tasks", "300"), 300, _label_studio_rows),
)


def _quick_flag(script: Path) -> tuple[str, ...]:
    """`--quick` when the script's --help offers it."""
    try:
        shown = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return ()
    return ("--quick",) if "--quick" in shown.stdout else ()


def every_bench() -> list[Bench]:
    """BENCHES, then any other benchmarks/*.py (not this file, not helpers starting with _)."""
    listed = {bench.name for bench in BENCHES}
    extra = [Bench(path.stem, _quick_flag(path), 240, note="not listed in all.py: default arguments")
             for path in sorted(HERE.glob("*.py")) if path.stem not in listed and path.stem != "all"
             and not path.stem.startswith("_")]
    return [*BENCHES, *extra]


def _table_rows(stdout: str) -> list[Row]:
    """Rows from the output's lines that name a goal."""
    rows = []
    for line in stdout.splitlines():
        if line.startswith("JSON ") or not GOAL_LINE.search(line):
            continue
        verdict = VERDICT.search(line)
        rows.append((line.strip(), "", None if verdict is None else verdict.group(1).upper() == "MET"))
    return rows


def run(bench: Bench) -> dict[str, Any]:
    """Run one benchmark; its rows, seconds and status."""
    script = HERE / f"{bench.name}.py"
    if not script.exists():
        return {"name": bench.name, "status": "missing", "seconds": 0.0, "rows": []}
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, str(script), *bench.args], capture_output=True, text=True,
                              timeout=bench.limit_s, cwd=HERE.parent)
    except subprocess.TimeoutExpired:
        return {"name": bench.name, "status": f"ran past its {bench.limit_s} s limit", "seconds": bench.limit_s,
                "rows": []}
    seconds = round(time.perf_counter() - started, 1)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"name": bench.name, "status": f"failed ({done.returncode}): {last[:160]}", "seconds": seconds,
                "rows": []}
    figures = next((json.loads(line[5:]) for line in reversed(done.stdout.splitlines()) if line.startswith("JSON ")),
                   {})
    rows = (bench.rows(figures) if bench.rows else []) or _table_rows(done.stdout)
    if not rows:
        rows = [(line, "", None) for line in done.stdout.strip().splitlines()[-3:] if not line.startswith("JSON ")]
    return {"name": bench.name, "status": "ok", "seconds": seconds, "rows": rows, "note": bench.note}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks (script stems)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and their arguments, run nothing")
    args = parser.parse_args(argv)
    benches = every_bench()
    if args.only:
        unknown = sorted(set(args.only) - {bench.name for bench in benches})
        if unknown:
            parser.error(f"no benchmark named {', '.join(unknown)} in {HERE}")
        benches = [bench for bench in benches if bench.name in args.only]
    if args.list:
        for bench in benches:
            print(f"{bench.name:16} {' '.join(bench.args) or '(no arguments)'}  (limit {bench.limit_s} s) {bench.note}")
        return 0
    print(f"benchmarks/all.py: {len(benches)} benchmarks, small sizes; {os.cpu_count()} CPUs, "
          f"1-minute load average {os.getloadavg()[0]:.2f} at the start", flush=True)
    results = []
    for bench in benches:
        result = run(bench)
        results.append(result)
        print(f"  {bench.name}: {result['status']} in {result['seconds']} s", flush=True)
    print()
    print(f"{'benchmark':16} {'met':>7}  figure (goal)")
    for result in results:
        if result["status"] != "ok":
            print(f"{result['name']:16} {'-':>7}  {result['status']}")
        for figure, goal, met in result["rows"]:
            shown = {True: "MET", False: "NOT MET", None: "-"}[met]
            print(f"{result['name']:16} {shown:>7}  {figure}" + (f" (goal {goal})" if goal else ""))
    total = round(sum(result["seconds"] for result in results), 1)
    print(f"total {total} s; load average {os.getloadavg()[0]:.2f} at the end")
    print("JSON " + json.dumps({"total_s": total, "benchmarks": results}, sort_keys=True))
    return 0 if all(result["status"] == "ok" for result in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
