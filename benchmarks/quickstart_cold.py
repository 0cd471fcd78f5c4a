"""Wall and CPU seconds of a cold `mmfaith quickstart` (no flags, an empty $MMFAITH_CACHE), against issue 30's goal.

What it measures
----------------
`python -m mmfaith.cli quickstart --out WORK/out` with MMFAITH_CACHE=WORK/cache, both removed first, so the
four families are built, their reference ends scored, both roles evaluated and compared: the README's first
command on a fresh machine (matplotlib's font cache aside, built once per machine). Wall seconds from start to
exit; CPU seconds are the user + system time of the quickstart and every process it waited for (its workers).
The quickstart's own lines `FAMILY: STEP: done in W s (C CPU-s)` are printed after.

Goal: under 60 s wall on 2 cores (run it under `taskset -c 0,1`). On a machine shared with other work the wall
clock measures the load as well; the CPU seconds do not depend on it as much.

`--keep NAME` keeps the output tree as WORK/NAME; `--compare NAME` then compares a later run's tree with it
(another checkout's, say): every file byte for byte, except the fields that say when and where it ran
(`latency_s`, `started`, `finished`, `seconds`, `cpu_seconds`, the servers' URLs and the predictions'
sha256, which covers the latencies), predictions.jsonl lines as a set (concurrent answers land in any order).
The output and cache paths are the same in both runs (WORK/out, WORK/cache), as they are written into the files.

    taskset -c 0,1 python benchmarks/quickstart_cold.py --keep first
    taskset -c 0,1 python benchmarks/quickstart_cold.py --compare first

It prints one line `JSON {...}` with every figure last.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mmfaith.step_pool import available_cores

GOAL_WALL_S, GOAL_CORES = 60.0, 2
WHEN_KEYS = frozenset({"latency_s", "started", "finished", "seconds", "cpu_seconds", "predictions_sha256", "server",
                       "base_urls"})
"""Fields that say when or where a run happened, not what it found."""
_LOCAL_URL = re.compile(r"http://127\.0\.0\.1:\d+")
_EXPLORER_DATA = re.compile(r'window\.MMFAITH_EXPLORER = JSON\.parse\((".*")\);?\s*$', re.S)


def cold_quickstart(work: Path, workers: int | None) -> dict[str, Any]:
    """Run the quickstart into WORK/out with an empty WORK/cache; its figures (module docstring)."""
    out, cache, log = work / "out", work / "cache", work / "quickstart.log"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "mmfaith.cli", "quickstart", "--out", str(out),
               *(["--workers", str(workers)] if workers else [])]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with open(log, "wb") as written:  # run from WORK: a checkout's own mmfaith/ folder must not shadow the package
        status = subprocess.run(command, cwd=work, env={**os.environ, "MMFAITH_CACHE": str(cache)},
                                stdout=written, stderr=subprocess.STDOUT, check=False).returncode
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {"status": status, "wall_s": round(wall, 2), "cpu_s": round(user + system, 2), "user_s": round(user, 2),
            "sys_s": round(system, 2), "cores": available_cores(), "log": str(log),
            "steps": [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines()
                      if ": done in " in line]}


def compare_trees(kept: Path, fresh: Path) -> list[str]:
    """The files that differ between two output trees beyond when and where they ran (module docstring)."""
    def files(root: Path) -> set[Path]:
        return {path.relative_to(root) for path in root.rglob("*") if path.is_file()}

    held, made = files(kept), files(fresh)
    problems = [f"only in {kept if name in held else fresh}: {name}" for name in sorted(held ^ made)]
    for name in sorted(held & made):
        a, b = kept / name, fresh / name
        if a.read_bytes() != b.read_bytes() and _what(a) != _what(b):
            problems.append(f"differs: {name}")
    return problems


def _what(path: Path) -> Any:
    """A file's content without its when-and-where fields (JSON, JSON lines, the explorer's data.js), else bytes."""
    data = path.read_bytes()
    if path.suffix == ".jsonl":
        return sorted(json.dumps(_scrub(json.loads(line)), sort_keys=True) for line in data.splitlines() if line.strip())
    if path.suffix == ".json":
        return _scrub(json.loads(data))
    found = _EXPLORER_DATA.match(data.decode("utf-8", errors="replace")) if path.name == "data.js" else None
    return _scrub(json.loads(json.loads(found.group(1)))) if found else data


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: "*" if key in WHEN_KEYS else _scrub(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrub(item) for item in value]
    return _LOCAL_URL.sub("http://127.0.0.1:PORT", value) if isinstance(value, str) else value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/mmfaith-quickstart-cold"),
                        help="folder for out/, cache/ and the kept trees")
    parser.add_argument("--workers", type=int, help="the quickstart's --workers (default: its own)")
    parser.add_argument("--keep", metavar="NAME", help="keep the output tree as WORK/NAME")
    parser.add_argument("--compare", metavar="NAME", help="compare the output tree with WORK/NAME")
    args = parser.parse_args(argv)
    figures = cold_quickstart(args.work, args.workers)
    for line in figures["steps"]:
        print(f"  {line}")
    met = figures["status"] == 0 and figures["wall_s"] < GOAL_WALL_S
    print(f"cold quickstart (exit {figures['status']}; log {figures['log']}): wall {figures['wall_s']:.1f} s, "
          f"CPU {figures['cpu_s']:.1f} s (user {figures['user_s']:.1f} + sys {figures['sys_s']:.1f}) on "
          f"{figures['cores']} cores")
    print(f"goal: under {GOAL_WALL_S:.0f} s wall on {GOAL_CORES} cores: {figures['wall_s']:.1f} s on "
          f"{figures['cores']} cores -> {'MET' if met else 'NOT MET'}"
          + ("" if figures["cores"] == GOAL_CORES else f" (measured on {figures['cores']} cores, not {GOAL_CORES})"))
    if args.compare:
        problems = compare_trees(args.work / args.compare, args.work / "out")
        figures["differing_files"] = problems
        print(f"compared with {args.work / args.compare}: "
              + ("the same files, equal but for when and where they ran" if not problems
                 else f"{len(problems)} differ: " + "; ".join(problems[:10])))
    if args.keep:
        kept = args.work / args.keep
        shutil.rmtree(kept, ignore_errors=True)
        os.replace(args.work / "out", kept)
    print("JSON " + json.dumps({**figures, "goal_wall_s": GOAL_WALL_S, "goal_cores": GOAL_CORES, "goal_met": met},
                               sort_keys=True))
    return 0 if figures["status"] == 0 and not figures.get("differing_files") else 1


if __name__ == "__main__":
    sys.exit(main())
