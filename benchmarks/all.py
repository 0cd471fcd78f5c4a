"""Every benchmark at a small size in one go, one table: figure against goal.

Each benchmark in benchmarks/ runs as its own subprocess (`python benchmarks/NAME.py ARGS`) with
the small arguments below and a time limit; its goal lines (a line of its output naming a goal)
and, where a benchmark prints none, the figures read from its closing `JSON {...}` line (or its
output) become the table's rows. A benchmark that fails, runs past its limit or is missing says so
in its row, and the exit status is 1 when any did. A benchmark added to benchmarks/ but not listed
here runs with `--quick` when its --help offers it, else with no arguments; files starting with _
are helpers, not benchmarks.

The sizes are small so the whole run stays under 10 minutes on 2 cores: the figures are meant to
show a regression on the next run, not to replace each benchmark's own full run (see its docstring
for the sizes its goal is stated at). Beside each benchmark's wall seconds come the CPU seconds of
everything it ran (its process and every child it waited for, servers included): the machine is
shared, other load stretches the wall time much more than the CPU time, and the total CPU seconds
over the cores is what the run would take on an idle machine at best.

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
import resource
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


def _vfaith_rows(figures: dict[str, Any], stdout: str) -> list[Row]:
    rate = figures.get("pairs_per_s")
    if rate is None:
        return []
    return [(f"VFaith build: {rate} pairs/s (--workers {figures.get('workers')}, {figures.get('pairs')} pairs)",
             ">= 4 pairs/s on 2 workers (issue 32)", rate >= 4 if figures.get("workers") == 2 else None)]


def _label_studio_rows(figures: dict[str, Any], stdout: str) -> list[Row]:
    return [(f"Label Studio {name} of {figures['tasks']} tasks: {figures[key + '_s']} s (CPU: client "
             f"{figures[key + '_client_cpu_s']} s, server {figures[key + '_server_cpu_s']} s)",
             f"< {figures['goal_s']:g} s at 3,000", figures[key + "_s"] < figures["goal_s"] if figures["tasks"] >= 3000 else None)
            for name, key in (("push", "push"), ("pull", "pull")) if key + "_s" in figures]


AUDIT_GOAL = 0.10
AUDIT_SHARE = re.compile(r"([a-z-]+) (\d+\.\d) %")


def _audit_rows(figures: dict[str, Any], stdout: str) -> list[Row]:
    """Each family's reject share from the audit's last line (`spd-faith 12.3 %, ...`), against 10 %."""
    last = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    return [(f"naturalness audit, {family}: {share} % of labelled accepted items rejected", "<= 10 % (issue 29)",
             float(share) / 100 <= AUDIT_GOAL) for family, share in AUDIT_SHARE.findall(last.split(";", 1)[-1])]


@dataclass(frozen=True)
class Bench:
    """One benchmark: its script's stem, the small arguments, a time limit, and optionally how to
    read rows from its JSON figures and output (else its goal lines are the rows)."""

    name: str
    args: tuple[str, ...]
    limit_s: int
    rows: Callable[[dict[str, Any], str], list[Row]] | None = None
    note: str = field(default="")


BENCHES = (
    Bench("mask_speed", ("--passes", "1"), 120),
    Bench("crm_embed", (), 150),
    Bench("run_throughput", ("--quick",), 120),
    Bench("build_spd", ("--quick",), 240),
    Bench("build_vfaith", ("--per-template", "3", "--embedded", "--workers", "2"), 150, _vfaith_rows),
    Bench("build_scale", ("--pairs", "40", "--workers", "2", "--executors", "local"), 150),
    Bench("score_scale", ("--sizes", "2000"), 240),
    Bench("label_studio", ("--tasks", "300"), 420, _label_studio_rows),
    Bench("release_memory", ("--rows", "300", "--shard-rows", "100", "300"), 180),
    Bench("startup", ("--repeat", "3"), 90),
    Bench("explorer_open", ("--items", "2000", "--images", "40", "--repeat", "1"), 180),
    Bench("naturalness_audit", (), 420, _audit_rows),
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
             and not path.stem.startswith("_")]  # _build_timing.py: the build benchmarks' helper
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


def _children_cpu_s() -> float:
    """CPU seconds (user + system) of every child process this one has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(bench: Bench) -> dict[str, Any]:
    """Run one benchmark; its rows, wall and CPU seconds and status."""
    script = HERE / f"{bench.name}.py"
    if not script.exists():
        return {"name": bench.name, "status": "missing", "seconds": 0.0, "cpu_s": 0.0, "rows": []}
    started, cpu = time.perf_counter(), _children_cpu_s()
    try:
        done = subprocess.run([sys.executable, str(script), *bench.args], capture_output=True, text=True,
                              timeout=bench.limit_s, cwd=HERE.parent)
    except subprocess.TimeoutExpired:
        return {"name": bench.name, "status": f"ran past its {bench.limit_s} s limit", "seconds": bench.limit_s,
                "cpu_s": round(_children_cpu_s() - cpu, 1), "rows": []}
    seconds, cpu_s = round(time.perf_counter() - started, 1), round(_children_cpu_s() - cpu, 1)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"name": bench.name, "status": f"failed ({done.returncode}): {last[:160]}", "seconds": seconds,
                "cpu_s": cpu_s, "rows": []}
    figures = next((json.loads(line[5:]) for line in reversed(done.stdout.splitlines()) if line.startswith("JSON ")),
                   {})
    rows = (bench.rows(figures, done.stdout) if bench.rows else []) or _table_rows(done.stdout)
    if not rows:
        rows = [(line, "", None) for line in done.stdout.strip().splitlines()[-3:] if not line.startswith("JSON ")]
    return {"name": bench.name, "status": "ok", "seconds": seconds, "cpu_s": cpu_s, "rows": rows, "note": bench.note}


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
        print(f"  {bench.name}: {result['status']} in {result['seconds']} s (CPU {result['cpu_s']} s)", flush=True)
    print()
    print(f"{'benchmark':16} {'met':>7}  figure (goal)")
    for result in results:
        if result["status"] != "ok":
            print(f"{result['name']:16} {'-':>7}  {result['status']}")
        for figure, goal, met in result["rows"]:
            shown = {True: "MET", False: "NOT MET", None: "-"}[met]
            print(f"{result['name']:16} {shown:>7}  {figure}" + (f" (goal {goal})" if goal else ""))
    total = round(sum(result["seconds"] for result in results), 1)
    cpu = round(sum(result["cpu_s"] for result in results), 1)
    cores = os.cpu_count() or 1
    print(f"total {total} s wall, {cpu} CPU s (at best {cpu / cores:.0f} s on {cores} idle cores); "
          f"load average {os.getloadavg()[0]:.2f} at the end")
    print("JSON " + json.dumps({"total_s": total, "total_cpu_s": cpu, "benchmarks": results}, sort_keys=True))
    return 0 if all(result["status"] == "ok" for result in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
