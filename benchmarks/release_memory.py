"""Release in bounded memory: peak RSS and seconds of `mmfaith release` of a 2,000-row build, by shard size.

A small SPD-Faith build of the embedded COCO sample is made (`mmfaith build spd-faith`, Telea fills) and
replicated to `--rows` pairs: copy k of each record gets a fresh id (its prefix and 16 hex digits of
sha256(id, k)) and shares the small build's image files (COCO size, about 0.4-0.6 MB per PNG, two per
row). Every record is marked accepted, as a verified build is. Then the build is released once per
`--shard-rows` value, each release in its own process (`mmfaith release`, as a user runs it), and its
peak RSS (the process's ru_maxrss), seconds and bytes written are printed. The shards of every run must
hold the same rows in the same order, so the benchmark also checks that the releases' row digests agree.

Goal (issue 32): peak RSS under 500 MB at every shard size, i.e. not growing with the shard size.

    python benchmarks/release_memory.py                      # 2,000 rows at 500 and 2,000 rows per shard
    python benchmarks/release_memory.py --rows 600 --shard-rows 100 600
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_MB = 500
MEASURE = ("import resource, sys; from mmfaith.cli import main; status = main(sys.argv[1:]); "
           "print('peak_rss_kb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(status)")


def replicate(small: Path, out: Path, rows: int) -> None:
    """`out`: the small build's records copied to `rows` accepted records with fresh ids, images shared."""
    shutil.copytree(small / "images", out / "images")
    info = json.loads((small / "build.json").read_text())
    (out / "build.json").write_text(json.dumps(info, sort_keys=True) + "\n")
    records = [json.loads(line) for line in (small / "records.jsonl").read_text().splitlines()]
    with open(out / "records.jsonl", "w", encoding="utf-8") as handle:
        for k in range(rows):
            record = dict(records[k % len(records)])
            digest = hashlib.sha256(f"{record['id']}:{k}".encode()).hexdigest()[:16]
            record["id"] = f"{record['id'].split('-')[0]}-{digest}"
            record["verification"] = {**record["verification"], "status": "accepted"}
            handle.write(json.dumps(record, sort_keys=True) + "\n")


def release(build: Path, out: Path, shard_rows: int) -> dict[str, float]:
    """One `mmfaith release` in its own process: peak RSS (MB), seconds, bytes written."""
    command = [sys.executable, "-c", MEASURE, "release", str(build), "--out", str(out), "--name", "bench/release",
               "--version", "1.0.0", "--shard-rows", str(shard_rows)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"release failed: {done.stderr.strip()}")
    peak_kb = next(int(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("peak_rss_kb"))
    written = sum(path.stat().st_size for path in out.rglob("*") if path.is_file())
    return {"peak_mb": peak_kb / 1024, "seconds": seconds, "written_mb": written / 1e6}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--shard-rows", type=int, nargs="+", default=[500, 2000])
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="release-memory-"))
    try:
        small = work / "small"
        if not (small / "build.json").is_file():
            subprocess.run([sys.executable, "-m", "mmfaith", "build", "spd-faith", "--out", str(small), "--per-tier",
                            "2", "--multi", "4", "--controls", "2", "--inpainter", "telea", "--no-progress"],
                           check=True, capture_output=True)
        build = work / f"build-{args.rows}"
        shutil.rmtree(build, ignore_errors=True)
        replicate(small, build, args.rows)
        print(f"release of {args.rows} rows (images {sum(p.stat().st_size for p in (build / 'images').rglob('*.png')) / 1e6:.0f} MB "
              f"on disk, shared by the copies); goal: peak RSS < {GOAL_MB} MB at every shard size")
        print(f"{'rows/shard':>10} {'shards':>6} {'peak RSS MB':>11} {'seconds':>8} {'written MB':>10}  goal")
        digests = set()
        for shard_rows in args.shard_rows:
            out = work / f"release-{shard_rows}"
            shutil.rmtree(out, ignore_errors=True)
            figures = release(build, out, shard_rows)
            manifest = json.loads((out / "manifest.json").read_text())
            digests.add(json.dumps(manifest["rows"], sort_keys=True))
            shards = sum(1 for name in manifest["files"] if name.endswith(".parquet"))
            ok = "ok" if figures["peak_mb"] < GOAL_MB else "MISSED"
            print(f"{shard_rows:>10} {shards:>6} {figures['peak_mb']:>11.0f} {figures['seconds']:>8.1f} "
                  f"{figures['written_mb']:>10.0f}  {ok}")
            shutil.rmtree(out)
        print("row digests agree across shard sizes" if len(digests) == 1 else "ROW DIGESTS DIFFER across shard sizes")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
