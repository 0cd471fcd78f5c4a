"""Throughput of `mmfaith run spd-faith` on the shared run engine against a server that answers after a fixed latency.

What it measures
----------------
A local OpenAI-protocol server runs in its own process (asyncio, so it holds 256 requests at
once cheaply: it counts the body's bytes, waits L = 0.5 s, answers a fixed chat completion). The
client is the real run loop (the shared engine driving SPD-Faith's probe plan through `run_spd_faith`: the chat client, images from PNG files as
base64 data URLs, predictions appended and fsynced) over a temporary build-like dataset of 512
pairs of 640x480 PNGs (crops of the embedded COCO sample; each original shared by 8 pairs, each
edited image its own, a patch recolored), two images per request.

For concurrency 1, 8, 64 and 256 it prints requests per second next to the ideal C / L, pairs
per second (four probes each, describe after count), the CPU time spent on images per request
(`image_payload`'s own accounting / requests) and the client's whole CPU time per request (this
process's user + system time over the run / requests). Rates are whole runs: the ramp-up and the
drain of the last pairs (their describe waits for their count) count against them.

The ratio is a wall-clock figure: on a machine shared with other work it measures the load as much
as the client. The client's CPU per request does not depend on the load, so the table's last line
also prints the rate one idle core could sustain at that cost (1000 / CPU ms per request) as a
share of the ideal at concurrency 64: where that share is below 0.9 the client itself is the limit,
where it is above, the wall-clock ratio's shortfall is the machine's.

Goal: at concurrency 64, at least 0.9 of the ideal requests per second on 2 cores shared with
the server. `--through evaluate` drives the same runs through `mmfaith evaluate`'s run step
(`evaluate.run_one`, with the options parsed from an `evaluate` command line), the path a profile's
every family takes, so the goal is checked there too.

    python benchmarks/run_throughput.py              # about a minute on 2 cores
    python benchmarks/run_throughput.py --through evaluate
    python benchmarks/run_throughput.py --repeat 3   # the fastest of 3 runs per concurrency
    python benchmarks/run_throughput.py --quick      # fewer requests: a smoke test

It prints a table, then one line `JSON {...}` with every figure.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from mmfaith.step_pool import available_cores

LATENCY_S = 0.5
WIDTH, HEIGHT = 640, 480
PAIRS = 512
ORIGINALS = 64
GOAL_CONCURRENCY, GOAL_RATIO = 64, 0.9
# (concurrency, pairs asked): 16 requests at concurrency 1, 8 latencies of work at 8 and 256, and 32 at the
# goal's 64, so that its ramp-up (the first images encoded) and drain (the last pairs' describe waits for
# their count: about one latency) weigh a few per cent, as they do in a real run of thousands of pairs.
LEVELS = ((1, 4), (8, 16), (64, 512), (256, 512))
QUICK_LEVELS = ((1, 2), (8, 8), (64, 64), (256, 128))
ANSWER = "I compare the two pictures.\n```json\n[]\n```\n\\boxed{1}"


# -- the server (its own process) ------------------------------------------------------------------

class _LatencyServer(asyncio.Protocol):
    """HTTP/1.1 keep-alive: reads one request (headers, then Content-Length bytes, discarded), waits, answers."""

    def __init__(self, latency_s: float, response: bytes) -> None:
        self.latency_s, self.response = latency_s, response
        self.head = b""
        self.body_left: int | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.body_left is None:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            length = next((int(line.split(b":", 1)[1]) for line in self.head[:end].split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            data, self.head = self.head[end + 4:], b""
            self.body_left = length
        self.body_left -= len(data)
        if self.body_left <= 0:
            self.body_left = None
            asyncio.get_running_loop().call_later(self.latency_s, self._answer)

    def _answer(self) -> None:
        if not self.transport.is_closing():
            self.transport.write(self.response)


def serve(latency_s: float) -> None:
    """Serve on a free 127.0.0.1 port; print the port; run until killed."""
    completion = json.dumps({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ANSWER}}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020}}).encode()
    response = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                + str(len(completion)).encode() + b"\r\n\r\n" + completion)

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(
            lambda: _LatencyServer(latency_s, response), "127.0.0.1", 0, backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(main())


# -- the dataset -----------------------------------------------------------------------------------

def _original(index: int) -> np.ndarray:
    """A 640x480 crop of an embedded sample image (resized up when it is smaller), mirrored on the second
    pass over the sample so that every original is its own image."""
    from PIL import Image

    from mmfaith.builders.coco_source import embedded_sample

    files = sorted(embedded_sample()[1].glob("*.jpg"))
    with Image.open(files[index % len(files)]) as source:
        rgb = source.convert("RGB")
    if (index // len(files)) % 2:
        rgb = rgb.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    scale = max(WIDTH / rgb.width, HEIGHT / rgb.height, 1.0)
    rgb = rgb.resize((round(rgb.width * scale), round(rgb.height * scale)))
    return np.asarray(rgb.crop((0, 0, WIDTH, HEIGHT)))


def _write_pair_images(task: tuple[Path, int]) -> list[tuple[str, str, str, str]]:
    """One original and its 8 edited variants: [(a path, a sha, b path, b sha)] relative to root."""
    from mmfaith.images import png_bytes, sha256_bytes

    root, index = task
    original = _original(index)
    a_png = png_bytes(original)
    a_rel = f"images/original/{index:03d}.png"
    (root / a_rel).write_bytes(a_png)
    out = []
    for variant in range(PAIRS // ORIGINALS):
        edited = original.copy()
        y, x = 40 + 50 * variant, 60 + 60 * variant
        edited[y:y + 40, x:x + 60] = edited[y:y + 40, x:x + 60][..., ::-1]  # swap R and B: a recolor
        b_png = png_bytes(edited)
        b_rel = f"images/edited/{index:03d}-{variant}.png"
        (root / b_rel).write_bytes(b_png)
        out.append((a_rel, sha256_bytes(a_png), b_rel, sha256_bytes(b_png)))
    return out


def make_dataset(root: Path) -> None:
    """A build-like dataset (records.jsonl + PNGs) of PAIRS pairs that passes the pair schema."""
    from mmfaith import __version__
    from mmfaith.jsonl import canonical_json

    (root / "images" / "original").mkdir(parents=True)
    (root / "images" / "edited").mkdir(parents=True)
    with ProcessPoolExecutor(max_workers=available_cores()) as pool:
        files = [f for group in pool.map(_write_pair_images, [(root, i) for i in range(ORIGINALS)]) for f in group]
    lines = []
    for number, (a_rel, a_sha, b_rel, b_sha) in enumerate(files):
        lines.append(canonical_json({
            "id": f"bench-{number:04d}", "image_a": a_rel, "image_b": b_rel, "image_a_sha256": a_sha,
            "image_b_sha256": b_sha, "subset": "single", "difficulty": "easy", "num_differences": 1,
            "differences": [{"type": "color", "category": "object", "category_id": 0, "color_before": None,
                             "color_after": None, "bbox_before": [0, 0, 60, 40], "bbox_after": [0, 0, 60, 40],
                             "area_ratio": 0.008, "description": "A patch changed color."}],
            "instance_count": 1, "caption": None,
            "source": {"dataset": "bench", "split": "none", "image_id": number, "file_name": a_rel,
                       "license": {"id": 0, "name": "benchmark only", "url": ""}, "flickr_url": None,
                       "coco_url": None, "attribution": "embedded COCO sample crops"},
            "verification": {"status": "pending"},
            "build": {"mmfaith_version": __version__, "seed": 0, "slot": "bench", "planner": {"name": "bench"},
                      "inpainter": None, "gates": {"delta_e": [], "outside_changed_pixels": 0}}}))
    (root / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- measuring -------------------------------------------------------------------------------------

def measure(dataset: Path, base_url: str, concurrency: int, pairs: int, work: Path,
            through: str = "run") -> dict[str, float]:
    """One run at one concurrency, into a fresh run dir, by `mmfaith run`'s path or `mmfaith evaluate`'s."""
    out = Path(tempfile.mkdtemp(prefix=f"c{concurrency}-", dir=work))
    before = resource.getrusage(resource.RUSAGE_SELF)
    if through == "evaluate":
        from mmfaith.cli import parser
        from mmfaith.evaluators.evaluate import run_one

        shared = parser().parse_args(["evaluate", "--base-url", base_url, "--model", "bench", "--out", str(out),
                                      "--concurrency", str(concurrency), "--limit", str(pairs), "--timeout", "60",
                                      "--max-attempts", "1", "--no-progress"])
        summary = run_one("spd-faith", str(dataset), (), shared, "bench", (base_url,), out / "runs" / "spd-faith")
    else:
        from mmfaith.evaluators.spd_faith.run import RunRequest, run_spd_faith

        summary = run_spd_faith(RunRequest(dataset=dataset, model="bench", base_urls=(base_url,), out=out,
                                           concurrency=concurrency, limit=pairs, timeout_s=60, max_attempts=1,
                                           progress=False))
    after = resource.getrusage(resource.RUSAGE_SELF)
    if summary.failed or summary.requests != 4 * pairs:
        raise RuntimeError(f"concurrency {concurrency}: {summary.line()}")
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rate, ideal = summary.requests / summary.elapsed_s, concurrency / LATENCY_S
    return {"concurrency": concurrency, "requests": summary.requests, "seconds": round(summary.elapsed_s, 3),
            "requests_per_s": round(rate, 2), "ideal_requests_per_s": ideal, "ratio": round(rate / ideal, 3),
            "pairs_per_s": round(pairs / summary.elapsed_s, 2),
            "image_cpu_ms_per_request": round(1000 * summary.image_cpu_s / summary.requests, 3),
            "client_cpu_ms_per_request": round(1000 * cpu_s / summary.requests, 3),
            "images_encoded": summary.images_encoded}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests: a smoke test, not a measurement")
    parser.add_argument("--repeat", type=int, default=1, help="keep the fastest of N runs per concurrency (default 1)")
    parser.add_argument("--through", choices=("run", "evaluate"), default="run",
                        help="drive the runs as `mmfaith run` does (default) or through `mmfaith evaluate`'s run step")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the server process
    args = parser.parse_args(argv)
    if args.serve:
        serve(LATENCY_S)
        return 0
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, start_new_session=True)
    assert server.stdout is not None
    try:
        base_url = f"http://127.0.0.1:{int(server.stdout.readline())}/v1"
        with tempfile.TemporaryDirectory(prefix="run-bench-") as tmp:
            dataset = Path(tmp) / "dataset"
            started = time.perf_counter()
            make_dataset(dataset)
            print(f"dataset: {PAIRS} pairs of {WIDTH}x{HEIGHT} PNGs in {time.perf_counter() - started:.1f} s; "
                  f"server latency {LATENCY_S} s; {available_cores()} CPUs", flush=True)
            rows = [max((measure(dataset, base_url, c, pairs, Path(tmp), args.through) for _ in range(args.repeat)),
                        key=lambda row: row["requests_per_s"])
                    for c, pairs in (QUICK_LEVELS if args.quick else LEVELS)]
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    print(f"{'conc':>5} {'requests':>8} {'seconds':>8} {'req/s':>8} {'ideal':>7} {'ratio':>6} {'pairs/s':>8} "
          f"{'img CPU ms/req':>14} {'CPU ms/req':>10}")
    for row in rows:
        print(f"{row['concurrency']:>5} {row['requests']:>8} {row['seconds']:>8.2f} {row['requests_per_s']:>8.1f} "
              f"{row['ideal_requests_per_s']:>7.0f} {row['ratio']:>6.2f} {row['pairs_per_s']:>8.2f} "
              f"{row['image_cpu_ms_per_request']:>14.3f} {row['client_cpu_ms_per_request']:>10.3f}")
    goal = next(row for row in rows if row["concurrency"] == GOAL_CONCURRENCY)
    met = goal["ratio"] >= GOAL_RATIO
    print(f"goal (through {args.through}): >= {GOAL_RATIO} of ideal at concurrency {GOAL_CONCURRENCY}: "
          f"{goal['ratio']:.2f} -> "
          f"{'MET' if met else 'NOT MET'}")
    core_rate = 1000 / goal["client_cpu_ms_per_request"]
    core_share = min(1.0, core_rate / goal["ideal_requests_per_s"])
    print(f"client CPU at concurrency {GOAL_CONCURRENCY}: {goal['client_cpu_ms_per_request']:.2f} ms/request: one idle "
          f"core sustains {core_rate:.0f} requests/s, {core_share:.2f} of the ideal "
          f"({'the client is not the limit' if core_share >= GOAL_RATIO else 'the client is the limit'})")
    print("JSON " + json.dumps({"cpus": available_cores(), "latency_s": LATENCY_S, "quick": args.quick,
                                "through": args.through,
                                "repeat": args.repeat, "rows": rows,
                                "goal_ratio": GOAL_RATIO, "goal_concurrency": GOAL_CONCURRENCY, "goal_met": met,
                                "idle_core_share_of_ideal": round(core_share, 3)},
                               sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
