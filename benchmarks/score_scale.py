"""Score and report at scale: seconds and peak memory of `mmfaith score` and `mmfaith report` by item count.

For each family, one small build of the embedded COCO sample is made (`mmfaith build`, as a user
runs it) and answered by the family's oracle (its first reference model, the one that reads the gold) (`mmfaith run` against
`mmfaith serve-reference`); an always-A model's predictions are the oracle's lines with every
response replaced by "A" (MCoT, whose answers are read from its lines' meta: every trace's last turn and
every response "<answer>A</answer>", and meta.answer and the trace's answers "A"; `_always_a`). Then, per
size, the build and both prediction files are replicated to that many items: copy k of each record and of
each prediction line gets fresh ids (the id's prefix and 16 hex digits of sha256(id, k)), images are shared
(the copies' records point at the same image files), so the work per item is that of the small build.

Printed per family and size: `score` of each model (wall seconds, CPU seconds (user + system: what a
loaded, shared machine inflates least; a score's worker processes included) and peak RSS of its largest process)
and `report` over the two, and the microseconds per item of the slower score. CRM's score embeds every
answer with Sentence-BERT (the model's cost, not ours), cached by text under $MMFAITH_CACHE: the
replicated answers repeat, so only the small build's distinct texts are embedded, and that time is
printed apart (`embed s`: the small build's score with a cold cache less with a warm one; the
sized scores run warm).

    python benchmarks/score_scale.py                                  # every family at 10k, 100k, 1M items
    python benchmarks/score_scale.py --sizes 10000 --families vfaith  # a quick run
    python benchmarks/score_scale.py --sizes 100000 --no-explorer     # the scoring alone, without explorer pages
    python benchmarks/score_scale.py --sizes 1000000 --families vfaith --no-explorer --build-workers 8
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.families import get as family

BUILD_ARGS = {
    "spd-faith": ["--per-tier", "2", "--multi", "4", "--controls", "2", "--inpainter", "telea"],
    "vfaith": ["--per-template", "2", "--inpainter", "telea"],
    "crm": ["--max-items", "20"],
    "mcot": ["--limit", "30"],
}
RECORD_FILES = ("records.jsonl", "perception.jsonl")
"""The files of a build dir whose lines are items (perception.jsonl: VFaith's perception items)."""


def _mmfaith(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "mmfaith", *args], check=True, stdout=subprocess.DEVNULL)


def _small_build(name: str, folder: Path, workers: int | None) -> None:
    """A small build (on `workers` processes: the same bytes whatever their number) and the oracle's and always-A
    model's predictions in `folder` (build/, oracle.jsonl, always-a.jsonl)."""
    build = folder / "build"
    if not (build / "build.json").is_file():
        pool = ["--workers", str(workers)] if workers else []
        _mmfaith("build", name, "--out", str(build), "--no-progress", *BUILD_ARGS[name], *pool)
    if not (folder / "oracle.jsonl").is_file():
        dataset = family(name).parts().open_dataset(build)
        oracle = family(name).reference_models[0][0]  # each family's first reference model reads the gold
        with ReferenceServer(dataset, oracle, family=name) as server:
            _mmfaith("run", name, "--dataset", str(build), "--model", oracle, "--base-url", server.base_url,
                     "--out", str(folder / "run"), "--no-progress")
        shutil.copy(folder / "run" / "predictions.jsonl", folder / "oracle.jsonl")
    lines = [json.loads(line) for line in (folder / "oracle.jsonl").read_text().splitlines() if line.strip()]
    always_a = [_always_a(name, line) for line in lines]
    (folder / "always-a.jsonl").write_text("".join(json.dumps(line) + "\n" for line in always_a))


def _always_a(name: str, line: dict) -> dict:
    """An oracle's prediction line as the always-A model's: every answer "A" (a failed call stays failed). MCoT
    reads a trace's answer from its last turn's text and a replay's from meta.answer, not from the response: those
    answer A too, in its prompt's format (an <answer> tag)."""
    if line["response"] is None:
        return {**line, "model": "always-a"}
    if name != "mcot":
        return {**line, "model": "always-a", "response": "A"}
    reply, meta = "<answer>A</answer>", dict(line["meta"])
    if "answer" in meta:
        meta["answer"] = "A"
    if isinstance(meta.get("trace"), dict):
        trace = {**meta["trace"], "answer": "A", "final_answer": "A"}
        if trace.get("turns"):
            trace["turns"] = [*trace["turns"][:-1], {**trace["turns"][-1], "text": reply}]
        meta["trace"] = trace
    return {**line, "model": "always-a", "response": reply, "meta": meta}


def _fresh_id(item_id: str, copy: int) -> str:
    if copy == 0:
        return item_id
    prefix = item_id.rsplit("-", 1)[0]
    return f"{prefix}-{hashlib.sha256(f'{item_id}/{copy}'.encode()).hexdigest()[:16]}"


def _item_ids(build: Path) -> list[str]:
    return [json.loads(line)["id"] for name in RECORD_FILES if (build / name).is_file()
            for line in (build / name).read_text().splitlines() if line.strip()]


def _replicate_lines(source: Path, target: Path, ids: list[str], copies: int) -> None:
    """Write `copies` copies of every line of `source`, every item id in copy k replaced by its fresh id."""
    lines = [line for line in source.read_text().splitlines() if line.strip()]
    present = [[item_id for item_id in ids if f'"{item_id}"' in line] for line in lines]
    with open(target, "w") as out:
        for copy in range(copies):
            for line, found in zip(lines, present):
                for item_id in found:
                    line = line.replace(f'"{item_id}"', f'"{_fresh_id(item_id, copy)}"')
                out.write(line + "\n")


def _replicate(small: Path, big: Path, items: int) -> int:
    """A build of about `items` items (copies of the small build's) with both prediction files; returns the copies."""
    build = small / "build"
    ids = _item_ids(build)
    n_items = sum(1 for line in (build / "records.jsonl").read_text().splitlines() if line.strip())
    copies = max(1, round(items / n_items))
    (big / "build").mkdir(parents=True)
    for entry in build.iterdir():
        if entry.name in RECORD_FILES:
            _replicate_lines(entry, big / "build" / entry.name, ids, copies)
        elif entry.is_dir():
            (big / "build" / entry.name).symlink_to(entry.resolve())
        else:
            shutil.copy(entry, big / "build" / entry.name)
    for model in ("oracle", "always-a"):
        _replicate_lines(small / f"{model}.jsonl", big / f"{model}.jsonl", ids, copies)
    return copies


SCORE_CPUS: set[int] | None = None
"""The CPUs `score` and `report` run on (`--score-cpus`); None: any."""


def _pinned() -> None:
    if SCORE_CPUS is not None:
        os.sched_setaffinity(0, SCORE_CPUS)


def _measured(*args: str) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds (user + system), peak RSS in MB) of one `mmfaith` command, on SCORE_CPUS."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "mmfaith", *args], stdout=subprocess.DEVNULL,
                               preexec_fn=_pinned)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"mmfaith {' '.join(args)} failed ({process.returncode})")
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _embed_seconds(name: str, small: Path, cache: Path | None) -> float | None:
    """CRM: seconds of embedding the small build's answers (cold cache less warm); None for other families, and
    with `cache` (a warm copy of the embedding cache: the scores read it, no embedding is timed)."""
    if name != "crm":
        return None
    os.environ["MMFAITH_CACHE"] = tempfile.mkdtemp(prefix="score-scale-cache-")
    if cache is not None:
        shutil.copytree(cache, os.environ["MMFAITH_CACHE"], dirs_exist_ok=True)
        return None
    seconds = []
    for _ in range(2):
        seconds.append(_measured("score", name, "--dataset", str(small / "build"), "--predictions",
                                 str(small / "oracle.jsonl"), "--from-run", "--out", str(small / "score"),
                                 "--overwrite")[0])
    return seconds[0] - seconds[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000], help="items per build")
    parser.add_argument("--families", nargs="+", default=list(BUILD_ARGS), choices=list(BUILD_ARGS))
    parser.add_argument("--bootstrap", type=int, default=1000, help="replicates (score's and report's default)")
    parser.add_argument("--no-explorer", action="store_true",
                        help="score and report with --no-explorer (the scoring alone, without the explorer pages)")
    parser.add_argument("--build-workers", type=int, default=None,
                        help="worker processes of the small builds (default: the build's own); a score that "
                             "spreads its items over processes (SPD-Faith, CRM) uses the cores --score-cpus leaves it")
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for the builds (kept; small builds are reused); default: a temporary one")
    parser.add_argument("--score-cpus", default=None, metavar="LIST",
                        help="run score and report on these CPUs only (e.g. 0,1: the 2-core goal on a larger machine; "
                             "the small builds use any)")
    parser.add_argument("--embedding-cache", type=Path, default=None, metavar="DIR",
                        help="CRM: a warm copy of $MMFAITH_CACHE for the small build's texts (no model is loaded; "
                             "the embedding time is then not measured)")
    parser.add_argument("--keep-scores", action="store_true",
                        help="keep each size's score dirs and report under --work (e.g. to compare two versions' "
                             "files with cmp); default: removed once measured")
    args = parser.parse_args()
    global SCORE_CPUS
    SCORE_CPUS = {int(cpu) for cpu in args.score_cpus.split(",")} if args.score_cpus else None
    work = args.work or Path(tempfile.mkdtemp(prefix="score-scale-"))
    explorer = ["--no-explorer"] if args.no_explorer else []
    print(f"{'family':<10} {'items':>9} {'lines':>9} {'score oracle':>24} {'score always-A':>24} "
          f"{'report':>24} {'us/item':>8} {'embed s':>8}", flush=True)
    for name in args.families:
        small = work / name / "small"
        small.mkdir(parents=True, exist_ok=True)
        _small_build(name, small, args.build_workers)
        embed = _embed_seconds(name, small, args.embedding_cache)
        for size in args.sizes:
            big = work / name / str(size)
            shutil.rmtree(big, ignore_errors=True)
            copies = _replicate(small, big, size)
            items = copies * sum(1 for _ in (small / "build" / "records.jsonl").open())
            lines = sum(1 for _ in (big / "oracle.jsonl").open())
            figures = {}
            for model in ("oracle", "always-a"):
                figures[model] = _measured("score", name, "--dataset", str(big / "build"), "--predictions",
                                           str(big / f"{model}.jsonl"), "--from-run", "--out", str(big / model),
                                           "--bootstrap", str(args.bootstrap), *explorer)
            figures["report"] = _measured("report", str(big / "oracle"), str(big / "always-a"), "--out",
                                          str(big / "report"), "--bootstrap", str(args.bootstrap), *explorer)
            slower = max(figures["oracle"][0], figures["always-a"][0])
            shown = {key: f"{s:6.1f} s ({cpu:5.1f} cpu) {mb:5.0f} MB" for key, (s, cpu, mb) in figures.items()}
            embedding = "-" if embed is None else f"{embed:.1f}"
            print(f"{name:<10} {items:>9,} {lines:>9,} {shown['oracle']:>24} {shown['always-a']:>24} "
                  f"{shown['report']:>24} {slower / items * 1e6:>8.0f} {embedding:>8}", flush=True)
            for model in () if args.keep_scores else ("oracle", "always-a", "report"):
                shutil.rmtree(big / model, ignore_errors=True)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
