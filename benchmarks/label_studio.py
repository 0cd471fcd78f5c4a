"""Push and pull of N (3,000) SPD-Faith tasks through `mmfaith annotate` against a real Label Studio.

What it measures
----------------
A real Label Studio (tools/install-label-studio.sh; $MMFAITH_LABEL_STUDIO_BIN or
<repo>/.venv-label-studio) starts on 127.0.0.1 with a fresh SQLite data folder. The build is a
small real SPD-Faith build of the embedded sample whose records are repeated, each copy its own id,
up to N records (the images are the build's). Images reach the server as /data/local-files/ URLs of
the build (local-files storage), never uploaded; the edited regions go with each task as read-only
rectangles that Label Studio draws (annotation/regions.py), so the push renders no image.

1. warm-up: the server is started and answers one small push (10 tasks, another project), so the
   timed calls meet a warm server;
2. push: `label_studio.push` of the N records into a new project (one import request, tasks with
   their pre-filled outlines), seconds;
3. re-push: the same push again (every task unchanged: nothing imported), seconds;
4. pull: a second project holds the N tasks, each with one annotation (a reject carrying the
   task's outline regions; imported with the tasks, setup, not timed); `label_studio.pull` exports
   them and merges N verdicts into records.jsonl, seconds.

Beside each wall time: the CPU seconds of this process (the client: records, task JSON, the merge)
and of the server's process group (read from /proc, so Linux only). On a loaded machine the wall
time stretches; the CPU seconds much less, so they are the figures to compare across runs.

Goals (issue 32): push of 3,000 tasks under 10 s on a warm server; pull of 3,000 annotated tasks
under 10 s.

    python benchmarks/label_studio.py                 # 3,000 tasks (a few minutes on 2 cores, mostly setup)
    python benchmarks/label_studio.py --tasks 300     # a quick run

It prints a table, then one line `JSON {...}` with every figure.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from mmfaith.annotation import label_studio as lsmod
from mmfaith.annotation.server import ServerSpec, find_label_studio, start_server, stop_server, wait_ready
from mmfaith.annotation.spd_faith.tasks import family, outlines
from mmfaith.annotation.status import read_records
from mmfaith.builders.spd_faith.build import BuildRequest, build_spd_faith
from mmfaith.jsonl import canonical_json

GOAL_S = 10.0
KEY_ENV = "MMFAITH_BENCH_LABEL_STUDIO_KEY"
REJECT = [{"from_name": "verdict", "to_name": "image_b", "type": "choices", "value": {"choices": ["reject"]}},
          {"from_name": "reasons", "to_name": "image_b", "type": "choices", "value": {"choices": ["other"]}}]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _repeat_records(seed_build: Path, out: Path, count: int) -> None:
    """`out`: a copy of `seed_build` whose records.jsonl holds `count` records, the seed's repeated
    in order, copy k of record r with id `<r.id>.k<k>`."""
    shutil.copytree(seed_build, out)
    seeds = [json.loads(line) for line in (seed_build / "records.jsonl").read_text().splitlines() if line.strip()]
    lines = []
    for number in range(count):
        record = dict(seeds[number % len(seeds)])
        record["id"] = f"{record['id']}.k{number // len(seeds):04d}"
        lines.append(canonical_json(record) + "\n")
    (out / "records.jsonl").write_text("".join(lines), encoding="utf-8")


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _group_cpu_s(group: int) -> float:
    """CPU seconds (user + system, reaped children included) of the processes in process group `group`
    (/proc/PID/stat fields 14-17; 0.0 where /proc is not there)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # the process ended while we looked
            continue
        if int(fields[2]) == group:
            total += sum(int(value) for value in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def _timed(server: int, call: Any, *args: Any, **kwargs: Any) -> tuple[float, float, float, Any]:
    """(wall seconds, this process's CPU seconds, the server group's CPU seconds, result) of one call."""
    start, cpu, server_cpu = time.perf_counter(), _cpu_s(), _group_cpu_s(server)
    result = call(*args, **kwargs)
    return time.perf_counter() - start, _cpu_s() - cpu, _group_cpu_s(server) - server_cpu, result


def _annotated_project(client: Any, title: str, pushed_project: int, build: Path) -> None:
    """A new project holding the pushed project's tasks again, each with one annotation (a reject that
    carries the task's read-only outlines back, as Label Studio's prelabelled annotation does): one
    import request (setup for the pull)."""
    records = {record["id"]: record for record in read_records(build)}
    tasks = lsmod.list_tasks(client, pushed_project)
    project = client.projects.create(title=title, label_config=family().label_config())
    client.projects.import_tasks(id=project.id, request=[
        {"data": task["data"], "annotations": [{"result": REJECT + outlines(build, records[task["data"]["record_id"]])}]}
        for task in tasks])


def measure(count: int, work: Path) -> dict[str, Any]:
    """Every figure of one run in `work` (left there)."""
    files_root = work / "files"
    files_root.mkdir(parents=True)
    seed = work / "seed-build"
    seed.mkdir()
    started = time.perf_counter()
    build_spd_faith(BuildRequest(out=seed, per_tier=1, seed=0, progress=False))
    build_s = time.perf_counter() - started
    build, warm = files_root / "bench", files_root / "warm"
    _repeat_records(seed, build, count)
    _repeat_records(seed, warm, 10)
    spec = ServerSpec(executable=find_label_studio(), data_dir=work / "data", files_root=files_root, port=_free_port(),
                      username="bench@example.com", password="bench-pass-1234", token=secrets.token_hex(20))
    log = work / "server.log"
    process = start_server(spec, log)
    try:
        startup_s = wait_ready(spec, process, log, timeout_s=600)
        os.environ[KEY_ENV] = spec.token
        client = lsmod.connect(spec.url, KEY_ENV)
        lsmod.push(client, warm, "warm-up", family(), files_root)
        figures: dict[str, Any] = {}

        def timed(key: str, call: Any, *args: Any) -> Any:
            wall, client_cpu, server_cpu, result = _timed(process.pid, call, *args)
            figures.update({f"{key}_s": round(wall, 2), f"{key}_client_cpu_s": round(client_cpu, 2),
                            f"{key}_server_cpu_s": round(server_cpu, 2)})
            return result

        report = timed("push", lsmod.push, client, build, "bench", family(), files_root)
        assert len(report.added) == count, f"push added {len(report.added)} of {count}"
        again = timed("repush", lsmod.push, client, build, "bench", family(), files_root)
        assert len(again.unchanged) == count, f"re-push left {len(again.unchanged)} of {count} unchanged"
        _annotated_project(client, "bench-annotated", report.project_id, build)
        pulled = timed("pull", lsmod.pull, client, build, "bench-annotated", family(), "any-reject")
        assert pulled.counts["rejected"] == count, f"pull: {pulled.counts}"
    finally:
        stop_server(process)
    return {**figures, "tasks": count, "seed_records": sum(1 for _ in (seed / "records.jsonl").open()),
            "seed_build_s": round(build_s, 2), "startup_s": round(startup_s, 2), "goal_s": GOAL_S,
            "push_met": figures["push_s"] < GOAL_S, "pull_met": figures["pull_s"] < GOAL_S,
            "load_average": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=3000, help="tasks pushed and pulled (default 3000)")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="work in DIR (must not exist) and keep it")
    args = parser.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="mmfaith-bench-ls-")) / "work"
    try:
        figures = measure(args.tasks, work)
    finally:
        if args.keep is None:
            shutil.rmtree(work.parent, ignore_errors=True)
    print(f"Label Studio, {figures['tasks']} SPD-Faith tasks (server start {figures['startup_s']} s, "
          f"load average {figures['load_average']:.1f})")
    for name, key in (("push (new project)", "push"), ("re-push (all unchanged)", "repush"),
                      ("pull (one annotation each)", "pull")):
        print(f"  {name:28s} {figures[key + '_s']:8.2f} s   CPU: client {figures[key + '_client_cpu_s']:6.2f} s, "
              f"server {figures[key + '_server_cpu_s']:6.2f} s")
    for key in ("push", "pull"):
        verdict = "MET" if figures[f"{key}_met"] else "NOT MET"
        print(f"goal: {key} of 3,000 tasks < {GOAL_S:g} s: {figures[key + '_s']} s for {figures['tasks']} -> "
              f"{verdict if figures['tasks'] >= 3000 else 'n/a (fewer tasks)'}")
    print("JSON " + json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
