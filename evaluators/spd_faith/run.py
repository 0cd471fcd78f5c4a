"""Run an SPD-Faith dataset through a chat model: every pair's four probes -> predictions.jsonl.

Contract (`run_spd_faith(RunRequest) -> RunSummary`)
----------------------------------------------------
- Per pair, in the order chosen for it (`pair_order`): `same`, `different` and `count` at once,
  then `describe` asked with the model's own count, parsed from its `count` answer
  (`spd_parse.parse_count`; meta.count_asked, null when none was readable and the open prompt was
  asked). Requests, not pairs, are bounded by `concurrency` (the client's slots, which serve waiting
  describe calls first, then count: see PRIORITY), so `describe` waits only for its own pair's
  `count`; at most `concurrency` pairs are open at once, which bounds the images held in memory.
- Every finished call is appended to RUN_DIR/predictions.jsonl at once (one durable line,
  schemas/prediction.schema.json). A call whose attempts all failed is an error line (response
  null, meta.error); a `describe` whose pair's `count` failed is not asked and gets an error line
  too. For an (id, probe) the last answered line wins.
- Resume: the same request on the same RUN_DIR asks only the (id, probe) without an answer (failed
  calls included); nothing answered is asked again. RUN_DIR/run.json holds the provenance; a
  RUN_DIR whose run.json names another model, layout, order, seed or prompt-template hash is refused.
- `dry_run` prints each request that would be sent (images abridged to their size) and a token
  estimate, and sends and writes nothing.
- The API key is read from the environment (`api_key_env`, else OPENAI_API_KEY, else "EMPTY" for
  local servers) and never printed or written.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from tqdm import tqdm

from mmfaith import __version__
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.chat_client import ChatClient, ChatResult, chat_body, estimate_prompt_tokens
from mmfaith.evaluators.image_payload import GAP_PX, ImagePayloads, ImageRef, image_part, sizes_shown
from mmfaith.evaluators.spd_faith.parse import parse_count
from mmfaith.evaluators.spd_faith.prompts import (LAYOUTS, ORDER_CHOICES, ORDERS, PROBES, TEMPLATE_VERSION, TEMPLATES_SHA256,
                                           prompt_text)
from mmfaith.jsonl import JsonlAppender, canonical_json, read_jsonl, write_atomic
from mmfaith.loaders.spd_faith.dataset import SpdPair, open_spd_dataset
from mmfaith.schema import check_record

PREDICTIONS = "predictions.jsonl"
RUN_JSON = "run.json"
RESUME_FIELDS = ("model", "layout", "order", "seed", "prompt_templates_sha256")
"""run.json fields that must match for a run to resume into an existing RUN_DIR."""

PRIORITY = {"describe": 0, "count": 1, "same": 2, "different": 2}
"""Waiting calls go lowest first: describe closes its pair and frees its images; count unblocks describe."""
Item = tuple[str, str]  # (pair id, probe)
T = TypeVar("T")


@dataclass(frozen=True)
class RunRequest:
    """What to run: the CLI's flags, one field each (see `mmfaith run spd-faith --help`)."""

    dataset: Path
    model: str
    base_urls: tuple[str, ...]
    out: Path
    concurrency: int = 16
    limit: int | None = None
    max_tokens: int = 1024
    temperature: float = 0.0
    timeout_s: float = 300.0
    max_attempts: int = 5
    layout: str = "separate"
    order: str = "original-first"
    seed: int = 0
    dry_run: bool = False
    api_key_env: str | None = None
    progress: bool = True
    backoff_s: float = 1.0
    """The first retry waits up to this long (full jitter), doubling per attempt; a Retry-After overrides it."""


@dataclass(frozen=True)
class RunSummary:
    """The state of RUN_DIR after a session, and what the session itself did."""

    out: Path
    model: str
    pairs: int
    expected: int  # (id, probe) items: pairs x 4
    answered: int  # items with an answer, over all sessions
    failed: int  # items whose last call failed and that have no answer
    requests: int  # calls this session made (for a dry run: would make)
    elapsed_s: float
    prompt_tokens: int  # over every call recorded in predictions.jsonl
    completion_tokens: int
    images_encoded: int  # base64 encodings this session made
    image_cpu_s: float  # CPU seconds this session spent on images
    dry_run: bool

    def line(self) -> str:
        """The one-line summary the CLI prints after a run (a dry run prints its own last line)."""
        rate = self.requests / self.elapsed_s if self.elapsed_s > 0 else 0.0
        text = (f"{self.model}: {self.answered}/{self.expected} answered, {self.failed} failed; "
                f"{self.requests} requests in {self.elapsed_s:.1f} s ({rate:.1f}/s); "
                f"predictions: {self.out / PREDICTIONS}")
        if self.failed:
            text += "; re-run the same command to retry the failed calls"
        return text


def pair_order(order: str, seed: int, pair_id: str) -> str:
    """The order a pair is shown in; for "random", a fixed function of the seed and the pair id."""
    if order != "random":
        return order
    return ORDERS[hashlib.sha256(f"{seed}:{pair_id}".encode()).digest()[0] & 1]


def shown_images(pair: SpdPair, order: str) -> tuple[ImageRef, ImageRef]:
    """(first, second) image of a pair in the order shown; image_a is the original."""
    original = ImageRef(pair.record["image_a_sha256"], pair.image_a_path)
    edited = ImageRef(pair.record["image_b_sha256"], pair.image_b_path)
    return (original, edited) if order == "original-first" else (edited, original)


class PredictionLog:
    """RUN_DIR/predictions.jsonl as a resumable record: answers, failures and token totals."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.answered: dict[Item, dict[str, Any]] = {}
        self.failed: set[Item] = set()
        self.prompt_tokens = 0
        self.completion_tokens = 0
        if path.exists():
            for number, line in read_jsonl(path):
                check_record("prediction", line, f"{path}:{number}")
                self.add(line)

    def add(self, line: dict[str, Any]) -> None:
        """Account for one line (already on disk)."""
        item = (line["id"], line["probe"])
        meta = line.get("meta") or {}
        self.prompt_tokens += meta.get("prompt_tokens") or 0
        self.completion_tokens += meta.get("completion_tokens") or 0
        if line["response"] is not None:
            self.answered[item] = line
            self.failed.discard(item)
        elif item not in self.answered:
            self.failed.add(item)

    def pending(self, pair_id: str) -> list[str]:
        return [probe for probe in PROBES if (pair_id, probe) not in self.answered]


def run_spd_faith(request: RunRequest) -> RunSummary:
    """Ask every pair's probes (see the module docstring) and return the run's summary."""
    _check_request(request)
    dataset = open_spd_dataset(request.dataset)
    pairs = dataset.pairs[:request.limit] if request.limit else dataset.pairs
    provenance = _provenance(request, dataset.dataset_id, dataset.revision, len(pairs))
    previous = _previous_run(request.out, provenance)
    log = PredictionLog(request.out / PREDICTIONS)
    todo = [pair for pair in pairs if log.pending(pair.id)]
    orders = {pair.id: pair_order(request.order, request.seed, pair.id) for pair in todo}
    if request.dry_run:
        requests = _print_dry_run(request, todo, orders, log)
        return _summary(request, pairs, log, requests, 0.0, None, dry_run=True)

    api_key = _api_key(request.api_key_env)
    request.out.mkdir(parents=True, exist_ok=True)
    started = _now()
    provenance["sessions"] = [*previous.get("sessions", []), {"started": started, "finished": None, "requests": 0}]
    _write_run_json(request.out, provenance, log, pairs, previous.get("image_sizes", []))
    payloads = ImagePayloads(request.layout, (shown_images(pair, orders[pair.id]) for pair in todo))
    session = _Session(request, log, payloads, orders, total=sum(len(log.pending(p.id)) for p in todo))
    clock = time.perf_counter()
    try:
        asyncio.run(session.run(todo, api_key))
    finally:
        session.close()
        elapsed = time.perf_counter() - clock
        provenance["sessions"][-1]["finished"] = _now()
        provenance["sessions"][-1]["requests"] = session.requests
        _write_run_json(request.out, provenance, log, pairs,
                        sorted(set(previous.get("image_sizes", [])) | payloads.stats.sizes))
    return _summary(request, pairs, log, session.requests, elapsed, payloads, dry_run=False)


class _Session:
    """One session's asking: the client, the predictions file, the images and the progress bar."""

    def __init__(self, request: RunRequest, log: PredictionLog, payloads: ImagePayloads,
                 orders: dict[str, str], total: int) -> None:
        self.request = request
        self.log = log
        self.payloads = payloads
        self.orders = orders
        self.requests = 0
        self._appender = JsonlAppender(log.path)
        # One writer thread: appends stay in order and their fsync does not block the event loop.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="predictions")
        self._progress = tqdm(total=total, unit="req", desc=request.model, disable=not request.progress,
                              dynamic_ncols=True)
        self._client: ChatClient | None = None

    async def run(self, pairs: list[SpdPair], api_key: str) -> None:
        request = self.request
        async with ChatClient(request.base_urls, api_key, concurrency=request.concurrency,
                              timeout_s=request.timeout_s, max_attempts=request.max_attempts,
                              backoff_s=request.backoff_s) as client:
            self._client = client
            await _each_bounded(pairs, self._pair, request.concurrency)

    def close(self) -> None:
        self._writer.shutdown(wait=True)
        self._appender.close()
        self._progress.close()

    async def _pair(self, pair: SpdPair) -> None:
        order = self.orders[pair.id]
        first, second = shown_images(pair, order)
        parts = await self.payloads.parts(first, second)
        try:
            pending = self.log.pending(pair.id)
            await asyncio.gather(self._count_then_describe(pair, order, parts, pending),
                                 *(self._ask(pair, order, parts, probe, None) for probe in ("same", "different")
                                   if probe in pending))
        finally:
            self.payloads.release(first, second)

    async def _count_then_describe(self, pair: SpdPair, order: str, parts: list[bytes], pending: list[str]) -> None:
        count_line = self.log.answered.get((pair.id, "count"))
        if count_line is None:
            count_line = await self._ask(pair, order, parts, "count", None)
        if "describe" not in pending:
            return
        if count_line["response"] is None:
            await self._write(self._line(pair, "describe", order, None, None, error=(
                "not asked: this pair's count probe failed and describe is asked with the model's own count; "
                "re-run to retry")))
            return
        await self._ask(pair, order, parts, "describe", parse_count(count_line["response"]))

    async def _ask(self, pair: SpdPair, order: str, parts: list[bytes], probe: str,
                   count: int | None) -> dict[str, Any]:
        assert self._client is not None
        result = await self._client.complete(_body(self.request, parts, prompt_text(probe, self.request.layout, count)),
                                             priority=PRIORITY[probe])
        self.requests += 1
        line = self._line(pair, probe, order, count if probe == "describe" else None, result)
        await self._write(line)
        return line

    def _line(self, pair: SpdPair, probe: str, order: str, count_asked: int | None, result: ChatResult | None,
              error: str | None = None) -> dict[str, Any]:
        """A predictions line: a call's result, or (result None) an error for a call not made."""
        meta: dict[str, Any] = {"order": order, "layout": self.request.layout, "count_asked": count_asked}
        if result is None:
            meta.update(latency_s=None, prompt_tokens=None, completion_tokens=None, finish_reason=None,
                        reasoning=None, error=error)
        else:
            meta.update(latency_s=round(result.latency_s, 4), prompt_tokens=result.prompt_tokens,
                        completion_tokens=result.completion_tokens, attempts=result.attempts,
                        finish_reason=result.finish_reason, reasoning=result.reasoning, error=result.error)
        return {"id": pair.id, "probe": probe, "response": None if result is None else result.text,
                "model": self.request.model, "meta": meta}

    async def _write(self, line: dict[str, Any]) -> None:
        await asyncio.get_running_loop().run_in_executor(self._writer, self._appender.append, line)
        self.log.add(line)
        self._progress.update(1)
        self._progress.set_postfix(answered=len(self.log.answered), failed=len(self.log.failed), refresh=False)


async def _each_bounded(items: Iterable[T], worker: Callable[[T], Coroutine[Any, Any, None]], limit: int) -> None:
    """worker(item) for every item, at most `limit` open at once, started in order; raises the first error."""
    window = asyncio.Semaphore(limit)
    failed = asyncio.Event()

    def finished(task: asyncio.Task[None]) -> None:
        window.release()
        if not task.cancelled() and task.exception() is not None:
            failed.set()

    tasks = []
    for item in items:
        await window.acquire()
        if failed.is_set():
            break
        task = asyncio.create_task(worker(item))
        task.add_done_callback(finished)
        tasks.append(task)
    await asyncio.gather(*tasks)


def _body(request: RunRequest, image_parts: list[bytes], text: str) -> bytes:
    return chat_body(model=request.model, max_tokens=request.max_tokens, temperature=request.temperature,
                     image_parts=image_parts, text=text)


def _check_request(request: RunRequest) -> None:
    problems = [
        (not request.base_urls, "--base-url is required (e.g. http://127.0.0.1:8000/v1)"),
        (request.concurrency < 1, f"--concurrency must be 1 or more, not {request.concurrency}"),
        (request.limit is not None and request.limit < 1, f"--limit must be 1 or more, not {request.limit}"),
        (request.max_tokens < 1, f"--max-tokens must be 1 or more, not {request.max_tokens}"),
        (request.timeout_s <= 0, f"--timeout must be more than 0 seconds, not {request.timeout_s}"),
        (request.max_attempts < 1, f"--max-attempts must be 1 or more, not {request.max_attempts}"),
        (request.layout not in LAYOUTS, f"--pair-layout must be one of {', '.join(LAYOUTS)}, not {request.layout!r}"),
        (request.order not in ORDER_CHOICES,
         f"--order must be one of {', '.join(ORDER_CHOICES)}, not {request.order!r}"),
    ]
    for bad, message in problems:
        if bad:
            raise MmfaithError(message + ".")


def _api_key(env_name: str | None) -> str:
    if env_name is None:
        return os.environ.get("OPENAI_API_KEY") or "EMPTY"
    key = os.environ.get(env_name)
    if not key:
        raise MmfaithError(f"--api-key-env {env_name}: that environment variable is not set; export it first.")
    return key


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _provenance(request: RunRequest, dataset_id: str, revision: str, pairs: int) -> dict[str, Any]:
    return {
        "family": "spd-faith", "model": request.model, "servers": list(request.base_urls),
        "temperature": request.temperature, "max_tokens": request.max_tokens, "layout": request.layout,
        "order": request.order, "seed": request.seed, "gap_px": GAP_PX if request.layout == "side-by-side" else None,
        "prompt_templates_sha256": TEMPLATES_SHA256, "prompt_template_version": TEMPLATE_VERSION,
        "mmfaith_version": __version__,
        "dataset": {"path": str(request.dataset), "id": dataset_id, "revision": revision, "pairs": pairs,
                    "limit": request.limit},
        "client": {"concurrency": request.concurrency, "timeout_s": request.timeout_s,
                   "max_attempts": request.max_attempts, "api_key_env": request.api_key_env},
    }


def _previous_run(out: Path, provenance: dict[str, Any]) -> dict[str, Any]:
    """The existing run.json of RUN_DIR ({} for a new one); refuses one made with other settings."""
    run_json = out / RUN_JSON
    if not run_json.exists():
        if (out / PREDICTIONS).exists():
            raise MmfaithError(f"{out / PREDICTIONS} exists but {run_json} does not; use a new --out for this run.")
        return {}
    try:
        previous = json.loads(run_json.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise MmfaithError(f"{run_json}: cannot read it ({exc}); use a new --out or restore the file.") from exc
    for name in RESUME_FIELDS:
        if previous.get(name) != provenance[name]:
            raise MmfaithError(f"{run_json}: field {name!r} is {previous.get(name)!r} but this run has "
                               f"{provenance[name]!r}; resume with the same settings or use a new --out.")
    return previous


def _counts(log: PredictionLog, pairs: list[SpdPair]) -> dict[str, int]:
    items = [(pair.id, probe) for pair in pairs for probe in PROBES]
    return {"expected": len(items), "answered": sum(item in log.answered for item in items),
            "failed": sum(item in log.failed for item in items)}


def _write_run_json(out: Path, provenance: dict[str, Any], log: PredictionLog, pairs: list[SpdPair],
                    image_sizes: list[str]) -> None:
    sessions = provenance["sessions"]
    document = {**provenance, "image_sizes": image_sizes, "counts": _counts(log, pairs),
                "tokens": {"prompt": log.prompt_tokens, "completion": log.completion_tokens},
                "started": sessions[0]["started"], "finished": sessions[-1]["finished"]}
    write_atomic(out / RUN_JSON, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def _summary(request: RunRequest, pairs: list[SpdPair], log: PredictionLog, requests: int, elapsed_s: float,
             payloads: ImagePayloads | None, dry_run: bool) -> RunSummary:
    counts = _counts(log, pairs)
    return RunSummary(out=request.out, model=request.model, pairs=len(pairs), expected=counts["expected"],
                      answered=counts["answered"], failed=counts["failed"], requests=requests, elapsed_s=elapsed_s,
                      prompt_tokens=log.prompt_tokens, completion_tokens=log.completion_tokens,
                      images_encoded=payloads.stats.encodings if payloads else 0,
                      image_cpu_s=payloads.stats.cpu_s if payloads else 0.0, dry_run=dry_run)


def _print_dry_run(request: RunRequest, pairs: list[SpdPair], orders: dict[str, str], log: PredictionLog) -> int:
    """Print the requests a run would send, images abridged; returns how many."""
    requests = tokens = 0
    for pair in pairs:
        order = orders[pair.id]
        sizes = sizes_shown(request.layout, *shown_images(pair, order))
        placeholders = [image_part(f"<image {w}x{h} PNG, base64 data URL>") for w, h in sizes]
        count_line = log.answered.get((pair.id, "count"))
        for probe in log.pending(pair.id):
            count = parse_count(count_line["response"]) if probe == "describe" and count_line else None
            text = prompt_text(probe, request.layout, count)
            estimate = estimate_prompt_tokens(text, sizes)
            body = json.loads(_body(request, placeholders, text))
            note = {"count_asked": "the model's count answer"} if probe == "describe" and not count_line else {}
            print(canonical_json({"id": pair.id, "probe": probe, "order": order, "layout": request.layout,
                                  "prompt_tokens_estimate": estimate, **note, "request": body}))
            requests += 1
            tokens += estimate
    print(f"dry run: {requests} requests to {', '.join(request.base_urls)}; about {tokens} prompt tokens "
          f"and at most {requests * request.max_tokens} completion tokens; nothing sent.")
    return requests
