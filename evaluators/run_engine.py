"""The run engine every family shares: a dataset's items, a family's probe plan, a model -> predictions.jsonl.

Contract (`run_benchmark(family, RunSettings, plan) -> RunSummary`)
------------------------------------------------------------------
- A family supplies a `ProbePlan`: the probes each item expects, the images each item shows, and
  `run_item(item, asker)`, a coroutine that asks the item's probes through the `ItemAsker`. It
  expresses independent probes (gather several `asker.ask`), dependent ones (await one answer,
  then ask with it), and multi-turn conversations whose later turns carry images made from
  earlier answers (`Turn`s holding `DerivedImage`s); any number of images per message.
- Every finished call is appended to RUN_DIR/predictions.jsonl at once (one durable line,
  schemas/prediction.schema.json), so a kill loses at most the calls in flight. A call whose
  attempts all failed is an error line (response null, meta.error); `asker.fail` records a call
  that was not made (e.g. its prerequisite failed). For an (id, probe) the last answered line wins.
- Resume: the same settings on the same RUN_DIR ask only the (id, probe) without an answer
  (failed calls included). RUN_DIR/run.json holds the provenance; a RUN_DIR whose run.json names
  another family, model, generation settings (`RunSettings.generation`: temperature, max_tokens,
  ...), dataset fingerprint or any of the plan's `resume_settings` is refused. A run holds RUN_DIR's
  lock (`mmfaith.dirlock`) while it writes: a second run into it is refused, naming the pid.
- Binding: every line records `meta.generation` (the run's generation settings, with the call's own
  temperature) and `meta.shown_sha256` (`shown_digest` of what its item shows: images, question,
  options), so `score` refuses a line made on another build of the same ids (predictions.py).
- Secrets: every line and run.json pass `mmfaith.redact` (the key in use, the base URLs' secrets,
  bearer and basic credentials), so a server echoing the request's headers or URL cannot put a
  credential on disk.
- Scheduling: requests, not items, are bounded by `concurrency` (the client's slots serve
  waiting calls lowest `priority` first: a plan gives the calls that close an item the lowest);
  at most `concurrency` items are open at once, which bounds the images held in memory. Images are
  read as stored and base64-encoded once per run (`ImagePayloads`), however many probes or turns
  show them.
- Replicas: with several base URLs, a replica that cannot be reached is taken out of the rotation
  and retried later (evaluators/chat_client.py); its calls go to the others, each call still
  writes exactly one line, and run.json records each session's per-replica attempts, answers,
  errors and times taken out (`sessions[].replicas`).
- Seeds and repeats: every request carries a `seed` (OpenAI and vLLM take it) derived from the
  run's sampling seed, the item, the probe and the repeat (`request_seed`), so the same command
  asks the same seeds. With `repeats` N every item's probes are asked N times (repeat 0 .. N-1; a
  repeat's dependent probes chain within it). Every line's `meta.generation` adds the call's
  `seed` and `repeat` to the run's settings; an answer is keyed by (id, probe, repeat), repeat 0
  where the line has none. More repeats resume a run (the sampling seed is a generation setting).
- Failure isolation: any exception while one item runs (a plan's bug, an agent loop's bad crop)
  becomes that item's recorded error (an error line for each of its probes without an answer,
  `item failed: TYPE: message`) and the run goes on. A server that cannot be reached for
  DEAD_SERVER_CALLS calls in a row (every attempt's connection refused, no answer between) ends the
  run early (`ServerGone`, with the resume hint) instead of failing every remaining call.
- Size: an answer (and its reasoning) longer than MAX_ANSWER_CHARS is stored cut to that length,
  the cut recorded (`meta.cut`: {"response": original length, "reasoning": ...}), so a server
  sending megabytes cannot blow up predictions.jsonl (nor what a dependent probe re-sends).
- Interruption: Ctrl-C and SIGTERM end the run with one line saying how far it got (answered of
  expected, where) and how to resume; every finished call is already on disk.
- `dry_run` prints each request that would be sent (images abridged to their size) and a token
  estimate, and sends and writes nothing.
- The API key is read from the environment (`api_key_env`, else OPENAI_API_KEY, else "EMPTY" for
  local servers) and never printed or written.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tqdm import tqdm

from mmfaith import __version__
from mmfaith.dirlock import hold_lock
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.blind import without_images
from mmfaith.evaluators.chat_client import ChatClient, ChatResult, chat_body, estimate_prompt_tokens
from mmfaith.evaluators.endpoint_check import check_endpoint
from mmfaith.evaluators.image_payload import ImagePayloads, Shown, image_part
from mmfaith.evaluators.predictions import repeat_of, shown_digest
from mmfaith.evaluators.run_settings import RunSettings
from mmfaith.jsonl import JsonlAppender, canonical_json, read_jsonl, write_text_atomic
from mmfaith.outdir import prepare_out_dir
from mmfaith.redact import redact_record, redact_url, register_secret, url_secrets
from mmfaith.schema import check_record, schema_errors

PREDICTIONS = "predictions.jsonl"
RUN_JSON = "run.json"
BASE_RESUME_FIELDS = ("family", "model", "generation", "no_image")
"""run.json fields that must match for a run to resume, before the plan's own `resume_settings`."""
RESUME_DEFAULTS = {"no_image": False, "circular": False}
"""What a run.json written before a field existed had for it (`circular`: a plan's resume setting, run --circular)."""

ERROR_HINTS = (
    ("HTTP 401", "check the key: OPENAI_API_KEY or --api-key-env"),
    ("HTTP 403", "check the key and its access to this model"),
    ("HTTP 404", "check --model and that --base-url ends in /v1"),
    ("HTTP 400", "the server refused the request: check the model accepts images and this many per message"),
    ("connection error", "is the server running at --base-url?"),
    ("timeout", "raise --timeout or lower --concurrency"),
)
"""Substring of a call's error -> what to check; the first match is shown with the most common error."""
MAX_ANSWER_CHARS = 100_000
"""The longest answer (or reasoning) stored; a longer one is cut and the cut recorded (`meta.cut`)."""
DEAD_SERVER_CALLS = 3
"""Calls in a row that could not connect to any server (every attempt refused) before the run stops."""
UNREACHABLE_ERRORS = ("connection error",)
ItemKey = tuple[str, str, int]  # (item id, probe, repeat)


class ServerGone(MmfaithError):
    """The servers could not be reached for DEAD_SERVER_CALLS calls in a row: the run stops early."""
T = TypeVar("T")


class EvalItem(Protocol):
    """One item of a dataset as the engine sees it: its id and its source (the bootstrap's unit)."""

    @property
    def id(self) -> str: ...

    @property
    def source_key(self) -> str: ...


class EvalDataset(Protocol):
    """A family's opened dataset: its items in order, and where it came from."""

    @property
    def items(self) -> Sequence[EvalItem]: ...

    dataset_id: str
    revision: str


@dataclass(frozen=True)
class Turn:
    """One message of a conversation: its role and its content, images (`Shown`) and text in order."""

    role: str
    content: tuple[Shown | str, ...]
    fields: dict[str, Any] | None = None
    """Further message fields: an assistant turn's `tool_calls`, a tool turn's `tool_call_id`."""


class ProbePlan(Protocol):
    """What a family asks of each item (see the module docstring)."""

    def expected_probes(self, item: Any) -> tuple[str, ...]:
        """Every probe this item gets a line for."""

    def images(self, item: Any) -> list[Shown]:
        """The stored or derived images this item's probes show (each once), known before asking."""

    def resume_settings(self) -> dict[str, Any]:
        """run.json fields that must match for a run to resume (layout, order, prompt templates' hash, ...)."""

    def provenance(self) -> dict[str, Any]:
        """Further run.json fields, recorded but not compared."""

    # Optional: `images_per_request` (int), the most images one request shows when that is more than two
    # (`run --serve` starts vLLM with that --limit-mm-per-prompt).

    def shows(self, item: Any) -> dict[str, Any]:
        """What the item's probes show the model, as JSON: its images' sha256 and any question and option
        text not fixed by the prompt templates; never gold answers or verification. The run dir is bound
        to the hash of every item's (`dataset_fingerprint`)."""

    async def run_item(self, item: Any, asker: ItemAsker) -> None:
        """Ask the item's pending probes through `asker`."""


class ReferenceModel(Protocol):
    """A deterministic model the reference server serves: it resolves a request to (item, probe) and answers.

    `answer(text, images, body)` gets the request's text parts (joined by newlines), the decoded
    bytes of its images in order, and the whole body; it returns the answer's text (or a whole
    assistant message, {"content", "tool_calls"}, for a model that calls tools), or raises
    `reference_server.RequestRefused` for a request that is not one of its dataset's probes.
    """

    name: str

    def answer(self, text: str, images: list[bytes], body: dict[str, Any]) -> str | dict[str, Any]: ...


@dataclass(frozen=True)
class RunSummary:
    """The state of RUN_DIR after a session, and what the session itself did."""

    out: Path
    model: str
    items: int
    expected: int  # (id, probe) items over the run's items
    answered: int  # items with an answer, over all sessions (`skipped` among them)
    failed: int  # items whose last call failed and that have no answer
    requests: int  # calls this session made (for a dry run: would make)
    elapsed_s: float
    prompt_tokens: int  # over every call recorded in predictions.jsonl
    completion_tokens: int
    images_encoded: int  # base64 encodings this session made
    image_cpu_s: float  # CPU seconds this session spent on images
    dry_run: bool
    top_error: str | None = None  # the most common error of the failed calls, with its count and a hint
    skipped: int = 0  # answered items not asked (meta.skipped: e.g. an MCoT replay of a trace without a tool call)

    def line(self) -> str:
        """The one-line summary the CLI prints after a run (a dry run prints its own last line)."""
        rate = self.requests / self.elapsed_s if self.elapsed_s > 0 else 0.0
        skipped = f", {self.skipped} skipped (not asked; why: meta.skipped)" if self.skipped else ""
        text = (f"{self.model}: {self.answered - self.skipped}/{self.expected} answered{skipped}, "
                f"{self.failed} failed; "
                f"{self.requests} requests in {self.elapsed_s:.1f} s ({rate:.1f}/s); "
                f"predictions: {self.out / PREDICTIONS}")
        if self.failed:
            text += f"; most common error: {self.top_error}"
            if self.answered:
                text += "; re-run the same command to retry the failed calls"
        return text


class PredictionLog:
    """RUN_DIR/predictions.jsonl as a resumable record: answers, failures and token totals."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.answered: dict[ItemKey, dict[str, Any]] = {}
        self.failed: dict[ItemKey, str] = {}  # the last error of each call without an answer
        self.prompt_tokens = 0
        self.completion_tokens = 0
        if path.exists():
            for number, line in read_jsonl(path):
                check_record("prediction", line, f"{path}:{number}")
                self.add(line)

    def add(self, line: dict[str, Any]) -> None:
        """Account for one line (already on disk)."""
        key = (line["id"], line["probe"], repeat_of(line))
        meta = line.get("meta") or {}
        self.prompt_tokens += meta.get("prompt_tokens") or 0
        self.completion_tokens += meta.get("completion_tokens") or 0
        if line["response"] is not None:
            self.answered[key] = line
            self.failed.pop(key, None)
        elif key not in self.answered:
            self.failed[key] = meta.get("error") or "failed"


class ItemAsker:
    """What a plan asks one item's probes through: the answers so far, and asking (or recording a failure)."""

    def __init__(self, session: _Session, item: EvalItem, repeat: int = 0) -> None:
        self._session = session
        self.item = item
        self.repeat = repeat
        self.dry_run = session.settings.dry_run

    def answered(self, probe: str) -> dict[str, Any] | None:
        """The answered line of this item's probe (in this repeat), None when it has no answer yet."""
        return self._session.log.answered.get((self.item.id, probe, self.repeat))

    def pending(self, probe: str) -> bool:
        """Whether this probe still needs an answer."""
        return self.answered(probe) is None

    @property
    def model(self) -> str:
        """The model this run asks (the `model` of every line)."""
        return self._session.settings.model

    @property
    def no_image(self) -> bool:
        """Whether this run asks without images (`run --no-image`: the engine removes every image part)."""
        return self._session.settings.no_image

    @property
    def run_dir(self) -> Path:
        """RUN_DIR: where a plan keeps files it makes once per run (an agent's crops)."""
        return self._session.settings.out

    async def ask(self, probe: str, turns: Sequence[Turn], meta: dict[str, Any], *, priority: int = 0,
                  temperature: float | None = None, dry_run_note: dict[str, Any] | None = None,
                  extra: dict[str, Any] | None = None, record: bool = True) -> dict[str, Any]:
        """Send one chat call and append its line; returns the line (response None when every attempt failed).

        `meta` is the family's part of the line's meta; the engine adds the call's figures (and the
        reply's `tool_calls` when it has any). `temperature` overrides the run's for this call;
        `extra` adds top-level request fields (`tools`, `continue_final_message`, ...). With
        `record=False` the line is returned and not written: one step of a multi-call probe, whose
        plan writes the probe's line itself (`write`). In a dry run the request is printed (with
        `dry_run_note`) and a line with response None is returned, nothing written.
        """
        return await self._session.ask(self.item, probe, turns, meta, priority, temperature, dry_run_note,
                                       extra, record, self.repeat)

    async def write(self, line: dict[str, Any]) -> None:
        """Append a line the plan composed (a multi-call probe's outcome; in a dry run: nothing), stamped
        with this repeat."""
        if not self.dry_run:
            await self._session.write(self._stamped(line))

    async def fail(self, probe: str, meta: dict[str, Any], error: str) -> dict[str, Any]:
        """Append an error line for a call that was not made (in a dry run: nothing)."""
        line = self._stamped(self._session.line(self.item, probe, meta, None, error))
        if not self.dry_run:
            await self._session.write(line)
        return line

    def _stamped(self, line: dict[str, Any]) -> dict[str, Any]:
        """The line with this repeat in its meta.generation (a composed or failed line may lack it)."""
        meta = dict(line.get("meta") or {})
        meta["generation"] = {**self._session.settings.generation(), **meta.get("generation", {}),
                              "repeat": self.repeat}
        return {**line, "meta": meta}


def request_seed(run_seed: int, item_id: str, probe: str, repeat: int) -> int:
    """The `seed` of a request: the first 31 bits of sha256 over (run seed, item, probe, repeat), so it fits
    every server's integer and differs per repeat."""
    digest = hashlib.sha256(canonical_json([run_seed, item_id, probe, repeat]).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def run_benchmark(family: str, settings: RunSettings, dataset: EvalDataset, plan: ProbePlan) -> RunSummary:
    """Ask every item's probes (see the module docstring) and return the run's summary."""
    _check_settings(settings)
    for base_url in settings.base_urls:
        register_secret(*url_secrets(base_url))
    if settings.dry_run:
        return _run_locked(family, settings, dataset, plan)
    prepare_out_dir(settings.out, "run")
    with hold_lock(settings.out, "run --out"):
        return _run_locked(family, settings, dataset, plan)


def _run_locked(family: str, settings: RunSettings, dataset: EvalDataset, plan: ProbePlan) -> RunSummary:
    items = list(dataset.items[:settings.limit] if settings.limit else dataset.items)
    provenance = _provenance(family, settings, dataset, plan, len(items))
    previous = _previous_run(settings.out, provenance, plan)
    log = PredictionLog(settings.out / PREDICTIONS)
    pending = {(item.id, repeat): len(_pending(plan, log, item, repeat)) for item in items
               for repeat in range(settings.repeats)}
    todo = [(item, repeat) for repeat in range(settings.repeats) for item in items if pending[(item.id, repeat)]]
    if settings.dry_run:
        session = _Session(settings, plan, log, ImagePayloads(()), total=0)
        try:
            asyncio.run(session.dry_run(todo))
        finally:
            session.close()
        return _summary(settings, plan, items, log, session.requests, 0.0, None, dry_run=True)

    api_key = _api_key(settings.api_key_env)
    register_secret(api_key)
    for base_url in settings.base_urls:
        for warning in check_endpoint(base_url, settings.model, api_key, min(settings.timeout_s, 30.0)):
            print(f"mmfaith: warning: {warning}", file=sys.stderr, flush=True)
    provenance["sessions"] = [*previous.get("sessions", []), {"started": _now(), "finished": None, "requests": 0}]
    _write_run_json(settings.out, provenance, plan, log, items, previous.get("image_sizes", []))
    payloads = ImagePayloads(() if settings.no_image else (image for item, _ in todo for image in plan.images(item)))
    session = _Session(settings, plan, log, payloads, total=sum(pending.values()))
    clock = time.perf_counter()
    try:
        with _sigterm_as_interrupt():
            asyncio.run(session.run(todo, api_key))
    except (KeyboardInterrupt, ServerGone) as exc:
        counts = _counts(plan, log, items, settings.repeats)
        what = "interrupted" if isinstance(exc, KeyboardInterrupt) else "stopped early"
        print(f"mmfaith: run {what}: {counts['answered']}/{counts['expected']} answered, {counts['failed']} failed, "
              f"kept in {settings.out / PREDICTIONS}.", file=sys.stderr, flush=True)
        raise
    finally:
        session.close()
        elapsed = time.perf_counter() - clock
        provenance["sessions"][-1]["finished"] = _now()
        provenance["sessions"][-1]["requests"] = session.requests
        provenance["sessions"][-1]["replicas"] = session.replica_stats
        _write_run_json(settings.out, provenance, plan, log, items,
                        sorted(set(previous.get("image_sizes", [])) | payloads.stats.sizes))
    return _summary(settings, plan, items, log, session.requests, elapsed, payloads, dry_run=False)


class _Session:
    """One session's asking: the client, the predictions file, the images and the progress bar."""

    def __init__(self, settings: RunSettings, plan: ProbePlan, log: PredictionLog, payloads: ImagePayloads,
                 total: int) -> None:
        self.settings = settings
        self.plan = plan
        self.log = log
        self.payloads = payloads
        self.requests = 0
        self.prompt_tokens_estimate = 0
        self._appender: JsonlAppender | None = None
        # One writer thread: appends stay in order and their fsync does not block the event loop.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="predictions")
        self._progress = tqdm(total=total, unit="req", desc=settings.model,
                              disable=not settings.progress or settings.dry_run, dynamic_ncols=True)
        self._client: ChatClient | None = None
        self.replica_stats: list[dict[str, Any]] = []
        self._shown: dict[str, str] = {}
        self._unreachable_calls = 0

    async def run(self, items: list[tuple[EvalItem, int]], api_key: str) -> None:
        settings = self.settings
        self._appender = JsonlAppender(self.log.path)
        async with ChatClient(settings.base_urls, api_key, concurrency=settings.concurrency,
                              timeout_s=settings.timeout_s, max_attempts=settings.max_attempts,
                              backoff_s=settings.backoff_s) as client:
            self._client = client
            try:
                await _each_bounded(items, self._item, settings.concurrency)
            finally:
                self.replica_stats = client.replica_stats()

    async def dry_run(self, items: list[tuple[EvalItem, int]]) -> None:
        for item, repeat in items:
            await self.plan.run_item(item, ItemAsker(self, item, repeat))
        settings = self.settings
        print(f"dry run: {self.requests} requests to {', '.join(settings.base_urls)}; about "
              f"{self.prompt_tokens_estimate} prompt tokens and at most {self.requests * settings.max_tokens} "
              "completion tokens; nothing sent.")

    def close(self) -> None:
        self._writer.shutdown(wait=True)
        if self._appender is not None:
            self._appender.close()
        self._progress.close()

    async def _item(self, work: tuple[EvalItem, int]) -> None:
        item, repeat = work
        self._shown[item.id] = shown_digest(self.plan.shows(item))
        asker = ItemAsker(self, item, repeat)
        try:
            await self.plan.run_item(item, asker)
        except ServerGone:
            raise
        except Exception as exc:  # one item's failure is that item's recorded error, never the run's end
            error = f"item failed: {type(exc).__name__}: {exc}"
            for probe in self.plan.expected_probes(item):
                if asker.pending(probe):
                    await asker.fail(probe, {}, error)
        finally:
            self.payloads.release(self.plan.images(item))

    async def ask(self, item: EvalItem, probe: str, turns: Sequence[Turn], meta: dict[str, Any], priority: int,
                  temperature: float | None, dry_run_note: dict[str, Any] | None,
                  extra: dict[str, Any] | None = None, record: bool = True, repeat: int = 0) -> dict[str, Any]:
        temperature = self.settings.temperature if temperature is None else temperature
        seed = request_seed(self.settings.sampling_seed, item.id, probe, repeat)
        extra = {**(extra or {}), "seed": seed}
        meta = {**meta, "generation": {**self.settings.generation(), "temperature": temperature, "seed": seed,
                                       "repeat": repeat}}
        if self.settings.no_image:
            turns = without_images(turns)
        if self.settings.dry_run:
            self._print_request(item, probe, turns, meta, temperature, dry_run_note, extra)
            return self.line(item, probe, meta, None, "dry run: not sent")
        assert self._client is not None
        messages = [(turn.role, [await self._part(piece) for piece in turn.content], turn.fields) for turn in turns]
        body = chat_body(model=self.settings.model, max_tokens=self.settings.max_tokens, temperature=temperature,
                         messages=messages, extra=extra)
        shown = [self.payloads.provenance(piece) for turn in turns for piece in turn.content
                 if not isinstance(piece, str)]
        result = await self._client.complete(body, priority=priority)
        self.requests += 1
        line = self.line(item, probe, {**meta, "images": shown}, result, None)
        if record:
            await self.write(line)
        self._note_reachable(result)
        return line

    def _note_reachable(self, result: ChatResult) -> None:
        """Count calls in a row that reached no server; raise ServerGone at DEAD_SERVER_CALLS."""
        unreachable = result.error is not None and result.error.startswith(UNREACHABLE_ERRORS)
        self._unreachable_calls = self._unreachable_calls + 1 if unreachable else 0
        if self._unreachable_calls >= DEAD_SERVER_CALLS:
            raise ServerGone(f"{self._unreachable_calls} calls in a row reached no server at "
                             f"{', '.join(redact_url(url) for url in self.settings.base_urls)} (last: {result.error}); "
                             "is the server running? re-run the same command to resume.")

    async def _part(self, piece: Shown | str) -> bytes:
        if isinstance(piece, str):
            return canonical_json({"type": "text", "text": piece}).encode("utf-8")
        return await self.payloads.part(piece)

    def line(self, item: EvalItem, probe: str, meta: dict[str, Any], result: ChatResult | None,
             error: str | None) -> dict[str, Any]:
        """A predictions line: a call's result, or (result None) an error for a call not made."""
        meta = dict(meta)
        if result is None:
            meta.update(latency_s=None, prompt_tokens=None, completion_tokens=None, finish_reason=None,
                        reasoning=None, error=error)
        else:
            cut = {name: len(text) for name, text in (("response", result.text), ("reasoning", result.reasoning))
                   if text is not None and len(text) > MAX_ANSWER_CHARS}
            meta.update(latency_s=round(result.latency_s, 4), prompt_tokens=result.prompt_tokens,
                        completion_tokens=result.completion_tokens, attempts=result.attempts,
                        finish_reason=result.finish_reason, reasoning=_capped(result.reasoning), error=result.error)
            if result.tool_calls:
                meta["tool_calls"] = list(result.tool_calls)
            if cut:
                meta["cut"] = cut
        return {"id": item.id, "probe": probe, "response": None if result is None else _capped(result.text),
                "model": self.settings.model, "meta": meta}

    async def write(self, line: dict[str, Any]) -> None:
        """Append a line, stamped with its settings and what its item shows (module docstring), redacted;
        every line of a `--no-image` run says so in meta.no_image, plan-composed ones too."""
        assert self._appender is not None
        meta = {"generation": self.settings.generation(), **(line.get("meta") or {})}
        if line["id"] in self._shown:
            meta["shown_sha256"] = self._shown[line["id"]]
        if self.settings.no_image:
            meta["no_image"] = True
        line = redact_record({**line, "meta": meta})
        await asyncio.get_running_loop().run_in_executor(self._writer, self._appender.append, line)
        self.log.add(line)
        self._progress.update(1)
        self._progress.set_postfix(answered=len(self.log.answered), failed=len(self.log.failed), refresh=False)

    def _print_request(self, item: EvalItem, probe: str, turns: Sequence[Turn], meta: dict[str, Any],
                       temperature: float, note: dict[str, Any] | None, extra: dict[str, Any] | None = None) -> None:
        sizes = [piece.size() for turn in turns for piece in turn.content if not isinstance(piece, str)]
        placeholders = iter(image_part(f"<image {w}x{h} PNG, base64 data URL>") for w, h in sizes)
        messages = [(turn.role, [next(placeholders) if not isinstance(piece, str)
                                 else canonical_json({"type": "text", "text": piece}).encode("utf-8")
                                 for piece in turn.content], turn.fields) for turn in turns]
        text = "\n".join(piece for turn in turns for piece in turn.content if isinstance(piece, str))
        estimate = estimate_prompt_tokens(text, sizes)
        body = json.loads(chat_body(model=self.settings.model, max_tokens=self.settings.max_tokens,
                                    temperature=temperature, messages=messages, extra=extra))
        shown = {key: value for key, value in meta.items() if value is not None}
        print(canonical_json({"id": item.id, "probe": probe, **shown, "prompt_tokens_estimate": estimate,
                              **(note or {}), "request": body}))
        self.requests += 1
        self.prompt_tokens_estimate += estimate


def _capped(text: str | None) -> str | None:
    """`text` cut to MAX_ANSWER_CHARS (module docstring)."""
    return text if text is None or len(text) <= MAX_ANSWER_CHARS else text[:MAX_ANSWER_CHARS]


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """While open (in the main thread), SIGTERM ends the run as Ctrl-C does; the previous handler is restored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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


def dataset_fingerprint(items: Iterable[EvalItem], plan: ProbePlan) -> str:
    """sha256 of what the probes show, item by item (`ProbePlan.shows`): a rebuilt dataset whose images or
    texts changed gets another fingerprint even where its ids did not change."""
    shown = [{"id": item.id, **plan.shows(item)} for item in items]
    return hashlib.sha256(canonical_json(shown).encode("utf-8")).hexdigest()


def _pending(plan: ProbePlan, log: PredictionLog, item: EvalItem, repeat: int) -> list[str]:
    return [probe for probe in plan.expected_probes(item) if (item.id, probe, repeat) not in log.answered]


def _check_settings(settings: RunSettings) -> None:
    problems = [
        (not settings.base_urls, "--base-url is required (e.g. http://127.0.0.1:8000/v1)"),
        (settings.concurrency < 1, f"--concurrency must be 1 or more, not {settings.concurrency}"),
        (settings.limit is not None and settings.limit < 1, f"--limit must be 1 or more, not {settings.limit}"),
        (settings.max_tokens < 1, f"--max-tokens must be 1 or more, not {settings.max_tokens}"),
        (settings.timeout_s <= 0, f"--timeout must be more than 0 seconds, not {settings.timeout_s}"),
        (settings.max_attempts < 1, f"--max-attempts must be 1 or more, not {settings.max_attempts}"),
        (settings.repeats < 1, f"--repeats must be 1 or more, not {settings.repeats}"),
    ]
    for bad, message in problems:
        if bad:
            raise MmfaithError(message + ".")
    named = schema_errors("prediction", {"id": "-", "probe": "-", "response": None, "model": settings.model,
                                         "meta": {"error": "-"}})
    if named:
        raise MmfaithError(f"--model {settings.model!r}: a model name is letters, digits and . _ : / @ + = - "
                           "(schemas/prediction.schema.json), so that it cannot add Markdown or HTML to a report.")


def _api_key(env_name: str | None) -> str:
    if env_name is None:
        return os.environ.get("OPENAI_API_KEY") or "EMPTY"
    key = os.environ.get(env_name)
    if not key:
        raise MmfaithError(f"--api-key-env {env_name}: that environment variable is not set; export it first.")
    return key


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _provenance(family: str, settings: RunSettings, dataset: EvalDataset, plan: ProbePlan,
                items: int) -> dict[str, Any]:
    return {
        "family": family, "model": settings.model, "no_image": settings.no_image,
        "servers": [redact_url(url) for url in settings.base_urls], "generation": settings.generation(),
        "repeats": settings.repeats,
        **plan.resume_settings(), **plan.provenance(), "mmfaith_version": __version__,
        "dataset_fingerprint": dataset_fingerprint(dataset.items, plan),
        "dataset": {"path": str(settings.dataset), "id": dataset.dataset_id, "revision": dataset.revision,
                    "items": items, "limit": settings.limit},
        "client": {"concurrency": settings.concurrency, "timeout_s": settings.timeout_s,
                   "max_attempts": settings.max_attempts, "api_key_env": settings.api_key_env},
        **({"serve": settings.serve} if settings.serve is not None else {}),
    }


def _previous_run(out: Path, provenance: dict[str, Any], plan: ProbePlan) -> dict[str, Any]:
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
    for name in (*BASE_RESUME_FIELDS, *plan.resume_settings()):
        if previous.get(name, RESUME_DEFAULTS.get(name)) != provenance[name]:
            raise MmfaithError(f"{run_json}: field {name!r} is {previous.get(name)!r} but this run has "
                               f"{provenance[name]!r}; resume with the same settings or use a new --out.")
    if previous.get("dataset_fingerprint", provenance["dataset_fingerprint"]) != provenance["dataset_fingerprint"]:
        raise MmfaithError(
            f"{run_json}: this run dir holds answers about another dataset (fingerprint "
            f"{previous['dataset_fingerprint'][:12]}, this dataset {provenance['dataset_fingerprint'][:12]}: its "
            f"images or questions changed); use a new --out for this dataset.")
    return previous


def _expected_keys(plan: ProbePlan, items: list[EvalItem], repeats: int) -> list[ItemKey]:
    return [(item.id, probe, repeat) for repeat in range(repeats) for item in items
            for probe in plan.expected_probes(item)]


def _counts(plan: ProbePlan, log: PredictionLog, items: list[EvalItem], repeats: int) -> dict[str, int]:
    keys = _expected_keys(plan, items, repeats)
    return {"expected": len(keys), "answered": sum(key in log.answered for key in keys),
            "skipped": sum(bool((log.answered[key].get("meta") or {}).get("skipped")) for key in keys
                           if key in log.answered),
            "failed": sum(key in log.failed for key in keys)}


def _write_run_json(out: Path, provenance: dict[str, Any], plan: ProbePlan, log: PredictionLog,
                    items: list[EvalItem], image_sizes: list[str]) -> None:
    sessions = provenance["sessions"]
    document = {**provenance, "image_sizes": image_sizes, "counts": _counts(plan, log, items, provenance["repeats"]),
                "tokens": {"prompt": log.prompt_tokens, "completion": log.completion_tokens},
                "started": sessions[0]["started"], "finished": sessions[-1]["finished"]}
    write_text_atomic(out / RUN_JSON, json.dumps(redact_record(document), indent=2, sort_keys=True) + "\n")


def _summary(settings: RunSettings, plan: ProbePlan, items: list[EvalItem], log: PredictionLog, requests: int,
             elapsed_s: float, payloads: ImagePayloads | None, dry_run: bool) -> RunSummary:
    counts = _counts(plan, log, items, settings.repeats)
    return RunSummary(out=settings.out, model=settings.model, items=len(items), expected=counts["expected"],
                      answered=counts["answered"], skipped=counts["skipped"], failed=counts["failed"],
                      requests=requests, elapsed_s=elapsed_s,
                      prompt_tokens=log.prompt_tokens, completion_tokens=log.completion_tokens,
                      images_encoded=payloads.stats.encodings if payloads else 0,
                      image_cpu_s=payloads.stats.cpu_s if payloads else 0.0, dry_run=dry_run,
                      top_error=_top_error(log, items, plan, settings.repeats))


def _top_error(log: PredictionLog, items: list[EvalItem], plan: ProbePlan, repeats: int) -> str | None:
    """'N x ERROR (hint)' for the most common error among the run's failed calls, None when none failed."""
    errors = Counter(log.failed[key] for key in _expected_keys(plan, items, repeats) if key in log.failed)
    if not errors:
        return None
    error, count = errors.most_common(1)[0]
    hint = next((hint for marker, hint in ERROR_HINTS if marker in error), None)
    return f"{count} x {error}" + (f" ({hint})" if hint else "")
