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

The reference line is `python -c pass` (the interpreter alone), printed beside both.

    python benchmarks/startup.py              # about 20 s on 2 cores
    python benchmarks/startup.py --repeat 10

It prints a table, then one line `JSON {...}` with every figure.
"""
from __future__ import annotations

import argparse
import json
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


def wall_s(command: list[str]) -> float:
    """Seconds from starting `command` to its exit (its output discarded); an error if it fails."""
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def first_request_s(dataset: Path, work: Path, attempt: int) -> float:
    """Seconds from starting a one-item run to its first chat request reaching the server."""
    server = FirstRequestServer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        started = time.perf_counter()
        subprocess.run([str(MMFAITH), "run", "spd-faith", "--dataset", str(dataset), "--model", "bench",
                        "--base-url", server.base_url, "--out", str(work / f"run-{attempt}"), "--limit", "1",
                        "--no-progress"], check=True, stdout=subprocess.DEVNULL)
        if server.first_request_at is None or server.requests != 4:
            raise RuntimeError(f"the run sent {server.requests} requests; one pair asks 4")
        return server.first_request_at - started
    finally:
        server.shutdown()
        server.server_close()


def summary(times: list[float]) -> dict[str, float]:
    return {"min_s": round(min(times), 3), "median_s": round(statistics.median(times), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each measurement")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mmfaith-startup-") as scratch:
        work = Path(scratch)
        make_dataset(work / "dataset")
        python = summary([wall_s([sys.executable, "-c", "pass"]) for _ in range(args.repeat)])
        help_ = summary([wall_s([str(MMFAITH), "--help"]) for _ in range(args.repeat)])
        first = summary([first_request_s(work / "dataset", work, attempt) for attempt in range(args.repeat)])
    rows = [("python -c pass (reference)", python, None), ("mmfaith --help", help_, HELP_GOAL_S),
            ("run: start to first request", first, FIRST_REQUEST_GOAL_S)]
    print(f"{'measurement':<30} {'min s':>7} {'median s':>9} {'goal s':>7}  met (by min)")
    for name, figures, goal in rows:
        met = "" if goal is None else ("yes" if figures["min_s"] < goal else "NO")
        print(f"{name:<30} {figures['min_s']:>7.3f} {figures['median_s']:>9.3f} "
              f"{'' if goal is None else f'{goal:.1f}':>7}  {met}")
    print("JSON " + json.dumps({"repeat": args.repeat, "python": python, "help": help_, "first_request": first,
                                "goals_s": {"help": HELP_GOAL_S, "first_request": FIRST_REQUEST_GOAL_S}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
