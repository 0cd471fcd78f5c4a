"""Many concurrent chat completions over the OpenAI protocol, to one server or several replicas.

Contract
--------
`ChatClient(base_urls, api_key, ...)` speaks the OpenAI chat protocol itself over `httpx2` (the HTTP
library the openai SDK 3.x and huggingface_hub use; the SDK itself is not imported: its ~0.6 CPU-s
import sat before a run's first request), with connection pools as large as the concurrency, and
is used as an async context manager. `await client.complete(body)` POSTs a request body made by
`chat_body` to BASE_URL/chat/completions with `Authorization: Bearer KEY`:

- never has more than `concurrency` requests on the wire; attempts go round-robin over the URLs
  (and over several connection pools per URL at high concurrency, see POOL_CONNECTIONS);
- takes a replica out of the rotation after OUT_AFTER consecutive attempts that could not reach
  it (connection refused or reset, timeouts), for a cool-down that starts at COOLDOWN_S and
  doubles each time (capped at MAX_COOLDOWN_S); after it the replica gets traffic again. While a
  replica is out its calls go to the others; when every replica is out, the one that comes back
  first is tried. `replica_stats()` reports each replica's share, errors and times out;
- retries 408, 429, 5xx, timeouts (`timeout_s` is a deadline for the whole attempt: connecting,
  sending and reading the whole answer, so a server trickling a byte at a time cannot hold a
  call longer than `timeout_s` per attempt), connection
  errors and bodies that are not a chat completion, with exponential backoff and full jitter
  (`backoff_s` doubling per attempt, capped at MAX_BACKOFF_S), or the server's Retry-After
  (`retry-after-ms` or `Retry-After` seconds, capped at MAX_RETRY_AFTER_S, plus up to
  RETRY_AFTER_JITTER of it); other 4xx fail at once;
- sends the body's bytes as they are: images are serialized once (`image_part`) and spliced into
  every body that shows them, not re-serialized by the client per request;
- never raises for a server or transport failure: the returned `ChatResult` carries the answer,
  or `error` after `max_attempts`, and always `attempts` and the last attempt's latency.

The API key is passed to the clients and nowhere else: it is never part of a result or an error.
Every failure message passes through `mmfaith.redact.redact` with the key, so a server that
quotes the key back (a 401 body echoing the Authorization header) cannot put it in a record.
"""
from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import json
import math
import random
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx2

from mmfaith.jsonl import canonical_json
from mmfaith.redact import redact, redact_url

RETRYABLE_STATUS = frozenset({408, 429})
"""Client errors worth another attempt: a timeout and a rate limit; any other 4xx fails at once."""
MAX_BACKOFF_S = 60.0
MAX_RETRY_AFTER_S = 120.0
RETRY_AFTER_JITTER = 0.1
"""A Retry-After wait is stretched by up to this share, so many clients told the same wait do not return at once."""
TEXT_CHARS_PER_TOKEN = 4
IMAGE_PATCH_PX = 28
POOL_CONNECTIONS = 4
"""About how many connections one client's pool holds; more concurrency gets more clients per URL (at 64
concurrent requests, under cProfile, each of the pool's two scans per request took about 1 ms of CPU at 16
connections a pool and 0.35 ms at 4: `benchmarks/run_throughput.py`, docs/evaluate.md)."""
OUT_AFTER = 2
COOLDOWN_S = 5.0
MAX_COOLDOWN_S = 120.0


@dataclass(frozen=True)
class ChatResult:
    """One call's outcome: `text` is None exactly when `error` is set (all attempts failed)."""

    text: str | None
    reasoning: str | None
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    attempts: int
    latency_s: float
    error: str | None
    tool_calls: tuple[dict[str, Any], ...] = ()
    """The reply's OpenAI `tool_calls` ({id, type, function: {name, arguments}}), as the server sent them."""


@dataclass
class _Replica:
    """One base URL: its clients (connection pools), its health and what it served."""

    url: str
    clients: list[Any]
    next_client: int = 0
    unreachable_in_a_row: int = 0
    out_until: float = 0.0
    times_out: int = 0
    attempts: int = 0
    answered: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def client(self) -> Any:
        self.next_client += 1
        return self.clients[self.next_client % len(self.clients)]

    def note(self, failure: _Failure | None, now: float) -> None:
        """Count one attempt's outcome; OUT_AFTER unreachable attempts in a row take the replica out."""
        self.attempts += 1
        if failure is None:
            self.answered += 1
            self.unreachable_in_a_row = 0
            return
        self.errors[failure.kind] = self.errors.get(failure.kind, 0) + 1
        if not failure.unreachable:
            return
        self.unreachable_in_a_row += 1
        if self.unreachable_in_a_row >= OUT_AFTER and now >= self.out_until:
            self.times_out += 1
            self.out_until = now + min(MAX_COOLDOWN_S, COOLDOWN_S * 2 ** (self.times_out - 1))
            self.unreachable_in_a_row = 0

    def stats(self) -> dict[str, Any]:
        return {"server": redact_url(self.url), "attempts": self.attempts, "answered": self.answered,
                "errors": dict(sorted(self.errors.items())), "times_taken_out": self.times_out}


@dataclass(frozen=True)
class _Failure:
    """One failed attempt: a message for the record, whether to retry, and the server's wait."""

    message: str
    retryable: bool
    retry_after_s: float | None = None
    kind: str = "malformed"
    unreachable: bool = False


def estimate_prompt_tokens(text: str, image_sizes: Iterable[tuple[int, int]]) -> int:
    """A rough prompt size: 4 characters per text token, one token per 28x28 image patch."""
    patches = sum(math.ceil(w / IMAGE_PATCH_PX) * math.ceil(h / IMAGE_PATCH_PX) for w, h in image_sizes)
    return math.ceil(len(text) / TEXT_CHARS_PER_TOKEN) + patches


def chat_body(*, model: str, max_tokens: int, temperature: float, messages: list[tuple[Any, ...]],
              extra: dict[str, Any] | None = None) -> bytes:
    """The JSON body of a chat request: each message is (role, its content parts, already serialized),
    optionally with a third element, a dict of further message fields (`tool_calls` of an assistant
    message, `tool_call_id` of a tool message); `extra` adds top-level fields (`tools`,
    `continue_final_message`, `add_generation_prompt`).

    Image parts are serialized once per run (`image_payload.image_part`) and spliced in here, one
    copy per request, never re-encoded.
    """
    head = canonical_json({**(extra or {}), "max_tokens": max_tokens, "model": model, "temperature": temperature})
    pieces = [head[:-1].encode("utf-8"), b',"messages":[']
    for number, (role, parts, *fields) in enumerate(messages):
        if number:
            pieces.append(b",")
        more = canonical_json(fields[0])[1:-1].encode("utf-8") if fields and fields[0] else b""
        pieces += [b'{"role":', canonical_json(role).encode("utf-8"), b"," + more if more else b"",
                   b',"content":[', b",".join(parts), b"]}"]
    pieces.append(b"]}")
    return b"".join(pieces)


def retry_after_s(headers: Any) -> float | None:
    """The wait a response asks for (retry-after-ms, or Retry-After in seconds), None if absent."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return min(MAX_RETRY_AFTER_S, max(0.0, float(value) * scale))
        except ValueError:
            continue  # an HTTP date: fall back to our own backoff
    return None


class _PrioritySlots:
    """At most `size` holders at once; waiters get a slot lowest priority first, then first come."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()

    async def acquire(self, priority: int) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        handed = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (priority, next(self._arrivals), handed))
        try:
            await handed
        except asyncio.CancelledError:
            if handed.done() and not handed.cancelled():  # cancelled just after being handed the slot
                self.release()
            raise

    def release(self) -> None:
        while self._waiters:
            _, _, waiter = heapq.heappop(self._waiters)
            if not waiter.done():
                waiter.set_result(None)  # the slot passes to the waiter directly
                return
        self._free += 1


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context every client of this process verifies servers with (httpx2's default: the system's CA
    bundle, or $SSL_CERT_FILE / $SSL_CERT_DIR). Making one reads the bundle, ~65 ms of CPU, which a run per family
    and the endpoint check before each paid again (3 s of a quickstart's CPU); a context is safe to share."""
    return httpx2.create_ssl_context()


class ChatClient:
    """Bounded, retried chat completions against one or more OpenAI-compatible base URLs."""

    def __init__(self, base_urls: Iterable[str], api_key: str, *, concurrency: int = 16, timeout_s: float = 300.0,
                 max_attempts: int = 5, backoff_s: float = 1.0) -> None:
        # httpx's pool scans (and probes the socket of) every connection it holds twice per request,
        # so one pool of C connections costs O(C) per request: profiled at 64, that scan was the
        # client's largest CPU cost after sending the bytes. Requests are therefore spread over
        # ceil(C / POOL_CONNECTIONS) clients per URL, each pool allowed up to C connections (never
        # a wait for a connection) and, with round-robin, holding about POOL_CONNECTIONS of them.
        # They share the process's one TLS context (`tls_context`).
        limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        tls = tls_context()
        shards = math.ceil(concurrency / POOL_CONNECTIONS)
        headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
                   "Accept": "application/json"}
        self._replicas = [
            _Replica(url, [httpx2.AsyncClient(base_url=url.rstrip("/") + "/", headers=headers, limits=limits,
                                              timeout=timeout_s, verify=tls)
                           for _ in range(shards)])
            for url in base_urls]
        self._slots = _PrioritySlots(concurrency)
        self._next = 0
        self._secrets = (api_key,)
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for replica in self._replicas:
            for client in replica.clients:
                await client.aclose()

    def _pick(self) -> _Replica:
        """The next replica in the rotation; when every one is out, the one that comes back first."""
        now = time.monotonic()
        count = len(self._replicas)
        for step in range(count):
            replica = self._replicas[(self._next + step) % count]
            if replica.out_until <= now:
                self._next += step + 1
                return replica
        return min(self._replicas, key=lambda r: r.out_until)

    def replica_stats(self) -> list[dict[str, Any]]:
        """Per replica (URL redacted): attempts sent, answered, errors by kind, times taken out of the rotation."""
        return [replica.stats() for replica in self._replicas]

    async def complete(self, body: bytes, priority: int = 0) -> ChatResult:
        """One chat completion for a `chat_body`, retried as the module docstring says; never raises for failures.

        When all slots are taken, waiting calls go lowest `priority` first: a caller puts first the
        calls that others wait for, so dependent work does not queue behind independent work.
        """
        attempt = 0
        while True:
            attempt += 1
            await self._slots.acquire(priority)
            replica = self._pick()  # picked once a slot is free: a replica may have gone out meanwhile
            client = replica.client()
            start = time.perf_counter()
            completion: Any = None
            try:
                response = await asyncio.wait_for(  # a deadline for the whole attempt, not only each read
                    client.post("chat/completions", content=body), self.timeout_s)
                failure = _status_failure(response)
                if failure is None:
                    completion = json.loads(response.content)
                    failure = _malformed(completion)
            except Exception as exc:  # classified; anything unexpected is a bug and re-raised there
                failure = _classify(exc, self.timeout_s)
            finally:
                self._slots.release()
            latency = time.perf_counter() - start
            replica.note(failure, time.monotonic())
            if failure is None:
                return _result(completion, attempt, latency)
            if not failure.retryable or attempt >= self.max_attempts:
                return ChatResult(None, None, None, None, None, attempt, latency,
                                  redact(failure.message, self._secrets))
            await asyncio.sleep(failure.retry_after_s * random.uniform(1.0, 1.0 + RETRY_AFTER_JITTER)
                                if failure.retry_after_s is not None
                                else random.uniform(0, min(MAX_BACKOFF_S, self.backoff_s * 2 ** (attempt - 1))))


def _classify(exc: Exception, timeout_s: float) -> _Failure:
    """What went wrong in one attempt that raised, and whether another attempt may help."""
    if isinstance(exc, (httpx2.TimeoutException, asyncio.TimeoutError)):
        return _Failure(f"timeout: no answer after waiting {timeout_s:g} s", retryable=True, kind="timeout",
                        unreachable=True)
    if isinstance(exc, httpx2.TransportError):
        return _Failure(f"connection error: {exc or type(exc).__name__}", retryable=True, kind="connection",
                        unreachable=True)
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
        return _Failure(f"malformed response: not a chat completion ({exc})", retryable=True)
    raise exc


def _status_failure(response: httpx2.Response) -> _Failure | None:
    """A response whose status is an error (400 and up), None for a success."""
    status = response.status_code
    if status < 400:
        return None
    return _Failure(f"HTTP {status}: {_error_message(response)}", retryable=status in RETRYABLE_STATUS or status >= 500,
                    retry_after_s=retry_after_s(response.headers), kind=f"http_{status}")


def _error_message(response: httpx2.Response) -> str:
    """The server's own message of an error response (OpenAI's {"error": {"message"}}), else the body."""
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    if isinstance(body, dict):
        body = body.get("error", body)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    return f"Error code: {response.status_code} - {body}"


def _malformed(completion: Any) -> _Failure | None:
    """Why a parsed body is not a chat completion with an answer, or None when it is one."""
    choices = completion.get("choices") if isinstance(completion, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("content"), (str, type(None))):
        return _Failure("malformed response: no choices[0].message in the body", retryable=True)
    return None


def _result(completion: Any, attempts: int, latency_s: float) -> ChatResult:
    """The answer of a chat completion that passed `_malformed`."""
    choice = completion["choices"][0]
    message = choice["message"]
    reasoning = message.get("reasoning_content") or message.get("reasoning")  # vLLM's reasoning parsers
    usage = completion.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    tool_calls = message.get("tool_calls")
    tool_calls = tuple(call for call in tool_calls if isinstance(call, dict)) if isinstance(tool_calls, list) else ()
    return ChatResult(text=message["content"] or "", reasoning=_text(reasoning), tool_calls=tool_calls,
                      finish_reason=_text(choice.get("finish_reason")),
                      prompt_tokens=_count(usage.get("prompt_tokens")),
                      completion_tokens=_count(usage.get("completion_tokens")),
                      attempts=attempts, latency_s=latency_s, error=None)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and value >= 0 else None
