"""Start-up of the `mmfaith` command: `mmfaith --help`, and a run's first request.

What it measures
----------------
1. `mmfaith --help`: the wall time of the whole process (interpreter start, imports, building the
   parser, printing), the fastest and the median of `--repeat` runs. Goal: under 0.3 s.
2. A run's first request: the time from starting `mmfaith run spd-faith --limit 1` (a process of
   its own, as a user starts it) to the moment a local OpenAI-protocol server (a thread of this
   process) receives its first chat request, over the 256-pair build-like dataset of
   benchmarks/run_throughput.py (opened and schema-checked as every run does). Goal: under 1 s.
   The run then finishes its four probes against the same server, so a run that fails is reported.

The reference line is `python -c pass` (the interpreter alone), printed beside both. Wall time on a
shared, loaded machine says more about the load than about mmfaith, so each figure also comes as the CPU
seconds (user + system) the process had used: for `--help` all of it, for a run what it had used when
its first request arrived (read from /proc/PID/stat at that moment).

    python benchmarks/startup.py              # about 20 s on 2 cores
    python benchmarks/startup.py --repeat 10

It prints a table, then one line `JSON {...}` with every figure.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from run_throughput import ANSWER, make_dataset

HELP_GOAL_S, FIRST_REQUEST_GOAL_S = 0.3, 1.0
MMFAITH = Path(sys.executable).with_name("mmfaith")


class FirstRequestServer(ThreadingHTTPServer):
    """Answers every chat request with one fixed completion; records when the first one arrived."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.first_request_at: float | None = None
        self.first_request_cpu_s: float | None = None
        self.client_pid: int | None = None
        self.requests = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FirstRequestServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # /v1/models: the run's endpoint check
        self._send({"object": "list", "data": [{"id": "bench", "object": "model", "created": 0, "owned_by": "x"}]})

    def do_POST(self) -> None:
        arrived = time.perf_counter()
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.server.first_request_at is None:
            self.server.first_request_at = arrived
            self.server.first_request_cpu_s = process_cpu_s(self.server.client_pid)
        self.server.requests += 1
        self._send({"id": "chatcmpl-startup", "object": "chat.completion", "created": 0, "model": "bench",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    def _send(self, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def process_cpu_s(pid: int | None) -> float | None:
    """CPU seconds (user + system) process `pid` has used so far; None where /proc cannot tell."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def help_s(command: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of `command` from start to exit (its output discarded); an error if it fails."""
    started, cpu = time.perf_counter(), children_cpu_s()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started, children_cpu_s() - cpu


def first_request_s(dataset: Path, work: Path, attempt: int) -> tuple[float, float]:
    """(wall, CPU) seconds from starting a one-item run to its first chat request reaching the server."""
    server = FirstRequestServer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        started = time.perf_counter()
        run = subprocess.Popen([str(MMFAITH), "run", "spd-faith", "--dataset", str(dataset), "--model", "bench",
                                "--base-url", server.base_url, "--out", str(work / f"run-{attempt}"), "--limit", "1",
                                "--no-progress"], stdout=subprocess.DEVNULL)
        server.client_pid = run.pid
        if run.wait() != 0:
            raise RuntimeError(f"the run failed (exit status {run.returncode})")
        if server.first_request_at is None or server.requests != 4:
            raise RuntimeError(f"the run sent {server.requests} requests; one pair asks 4")
        return server.first_request_at - started, server.first_request_cpu_s or float("nan")
    finally:
        server.shutdown()
        server.server_close()


def summary(measured: list[tuple[float, float]]) -> dict[str, float]:
    walls, cpus = [wall for wall, _ in measured], [cpu for _, cpu in measured]
    return {"min_s": round(min(walls), 3), "median_s": round(statistics.median(walls), 3),
            "cpu_min_s": round(min(cpus), 3), "cpu_median_s": round(statistics.median(cpus), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each measurement")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mmfaith-startup-") as scratch:
        work = Path(scratch)
        make_dataset(work / "dataset")
        python = summary([help_s([sys.executable, "-c", "pass"]) for _ in range(args.repeat)])
        help_ = summary([help_s([str(MMFAITH), "--help"]) for _ in range(args.repeat)])
        first = summary([first_request_s(work / "dataset", work, attempt) for attempt in range(args.repeat)])
    rows = [("python -c pass (reference)", python, None), ("mmfaith --help", help_, HELP_GOAL_S),
            ("run: start to first request", first, FIRST_REQUEST_GOAL_S)]
    print(f"{'measurement':<30} {'min s':>7} {'median s':>9} {'CPU min s':>10} {'CPU median s':>13} {'goal s':>7}  "
          "met (wall min, CPU min)")
    for name, figures, goal in rows:
        met = "" if goal is None else " ".join("yes" if figures[key] < goal else "NO" for key in ("min_s", "cpu_min_s"))
        print(f"{name:<30} {figures['min_s']:>7.3f} {figures['median_s']:>9.3f} {figures['cpu_min_s']:>10.3f} "
              f"{figures['cpu_median_s']:>13.3f} {'' if goal is None else f'{goal:.1f}':>7}  {met}")
    print("JSON " + json.dumps({"repeat": args.repeat, "python": python, "help": help_, "first_request": first,
                                "goals_s": {"help": HELP_GOAL_S, "first_request": FIRST_REQUEST_GOAL_S}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
