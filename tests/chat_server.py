"""A real HTTP chat-model server for tests: OpenAI chat completions and Gemini generateContent.

Contract
--------
`ChatServer(script, default=...)` binds 127.0.0.1 on a free port and serves from a background
thread (stdlib ThreadingHTTPServer); use it as a context manager. It speaks:

- OpenAI: ``POST /v1/chat/completions`` answers a ``chat.completion`` body (id, object, created,
  model, choices[{index, message{role, content}, finish_reason}], usage); ``GET /v1/models`` lists
  ``model_ids``. Errors use OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``.
- Gemini: ``POST /{version}/models/{model}:generateContent`` (google-genai 3.x sends ``v1`` by
  default; ``v1beta`` works too) answers ``{"candidates": [{"content": {"parts": [{"text"}],
  "role": "model"}, "finishReason": "STOP", "index": 0}], "usageMetadata": {...}}``. Errors use
  Google's shape ``{"error": {"code", "message", "status"}}``.

Every completion request (either protocol) takes the next reply from one shared queue; when the
queue is empty the `default` reply repeats. A reply is a content string, an int HTTP status (an
error answer), or a callable that takes the parsed request JSON and returns either of those.
With `echo_key_401`, every completion request is refused with 401 and a body quoting its
Authorization header, as some servers do ("Incorrect API key provided: Bearer sk-..."): the
hostile case for secrets. With `retry_after_ms`, error answers carry ``retry-after-ms`` (OpenAI's clients honour it, so their
retries take milliseconds instead of seconds of backoff).

Every request is recorded (`requests`: method, path, headers, parsed JSON body, protocol), and
`request_text` / `request_images` read the prompt and images out of a body of either protocol.
A reply callable that raises answers 500 and is re-raised when the `with` block ends, so a bug in
a test's script cannot pass for a server error.
"""
from __future__ import annotations

import base64
import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

from mmfaith.background_http import BackgroundHTTP

Reply = Union[str, int, Callable[[dict[str, Any]], Union[str, int]]]

OPENAI_CHAT = "/v1/chat/completions"
OPENAI_MODELS = "/v1/models"
GEMINI_GENERATE = re.compile(r"^/(?P<version>v1[a-z0-9]*)/models/(?P<model>[^/:]+):generateContent$")
GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
OPENAI_ERROR_TYPE = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                     429: "rate_limit_exceeded"}


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased (HTTP header names are case-insensitive)
    body: Any
    protocol: str  # "openai", "gemini" or "other"
    client_port: int = 0  # the client's TCP port: one port per connection, so a reused connection repeats it


def _b64decode(data: str) -> bytes:
    """Strict base64, standard or URL-safe alphabet, padding optional (google-genai sends URL-safe)."""
    data = data.replace("-", "+").replace("_", "/")
    return base64.b64decode(data + "=" * (-len(data) % 4), validate=True)


def request_text(body: dict[str, Any]) -> str:
    """All text parts of a chat request body (OpenAI messages or Gemini contents), joined by newlines."""
    texts: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.extend(part["text"] for part in content or [] if part.get("type") == "text")
    for content in body.get("contents", []):
        texts.extend(part["text"] for part in content.get("parts", []) if "text" in part)
    return "\n".join(texts)


def request_images(body: dict[str, Any]) -> list[tuple[str, bytes]]:
    """(mime type, decoded bytes) of every image in a chat request body, in order.

    OpenAI images must be base64 data URLs (``data:<mime>;base64,<data>``); Gemini images are
    ``inlineData`` parts (google-genai encodes them URL-safe and writes ``mime_type``, not
    ``mimeType``; both spellings are read). Malformed data raises ValueError (binascii.Error).
    """
    images: list[tuple[str, bytes]] = []
    for message in body.get("messages", []):
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "image_url":
                match = re.fullmatch(r"data:([\w/+.-]+);base64,(.*)", part["image_url"]["url"], flags=re.DOTALL)
                if match is None:
                    raise ValueError(f"image is not a base64 data URL: {part['image_url']['url'][:40]!r}")
                images.append((match.group(1), _b64decode(match.group(2))))
    for content in body.get("contents", []):
        for part in content.get("parts", []):
            inline = part.get("inlineData") or part.get("inline_data")
            if inline is not None:
                mime = inline.get("mimeType") or inline.get("mime_type")
                images.append((mime, _b64decode(inline["data"])))
    return images


class ChatServer(BackgroundHTTP):
    """Scripted OpenAI- and Gemini-compatible chat server on 127.0.0.1 (see the module docstring)."""

    thread_name = "chat-server"

    def __init__(self, script: Iterable[Reply] = (), default: Reply = "OK", *,
                 model_ids: Iterable[str] = ("test-model",), retry_after_ms: int | None = None,
                 echo_key_401: bool = False) -> None:
        self._script: deque[Reply] = deque(script)
        self.default = default
        self.model_ids = tuple(model_ids)
        self.retry_after_ms = retry_after_ms
        self.echo_key_401 = echo_key_401
        self._requests: list[RecordedRequest] = []
        self._errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True

    @property
    def url(self) -> str:
        """Root URL (Gemini's base_url)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """OpenAI base_url (the root plus /v1)."""
        return self.url + "/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def completion_requests(self) -> list[RecordedRequest]:
        """The recorded chat-completion and generateContent requests, in arrival order."""
        return [r for r in self.requests if r.protocol in ("openai", "gemini") and r.method == "POST"]

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.stop()
        if exc_type is None and self._errors:
            raise RuntimeError("a scripted reply raised inside the chat server") from self._errors[0]

    # -- serving ---------------------------------------------------------------------------------

    def _next_reply(self, body: dict[str, Any]) -> str | int:
        with self._lock:
            reply = self._script.popleft() if self._script else self.default
        if callable(reply):
            try:
                reply = reply(body)
            except Exception as exc:  # surfaced by __exit__; the client sees a 500
                with self._lock:
                    self._errors.append(exc)
                return 500
        if not isinstance(reply, (str, int)):
            raise TypeError(f"a scripted reply must give a str or an int, not {type(reply).__name__}")
        return reply

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    data = b""
                    while (size := int(self.rfile.readline().split(b";")[0], 16)) > 0:
                        data += self.rfile.read(size)
                        self.rfile.readline()
                    self.rfile.readline()
                    return data
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _error(self, status: int, protocol: str, message: str | None = None) -> None:
                message = message or f"chat-server: {status} {HTTPStatus(status).phrase}"
                if protocol == "gemini":
                    payload = {"error": {"code": status, "message": message,
                                         "status": GOOGLE_STATUS.get(status, "UNKNOWN")}}
                else:
                    payload = {"error": {"message": message, "type": OPENAI_ERROR_TYPE.get(status, "server_error"),
                                         "param": None, "code": None}}
                extra = {} if server.retry_after_ms is None else {"retry-after-ms": str(server.retry_after_ms)}
                self._send(status, payload, extra)

            def _handle(self, method: str) -> None:
                path = self.path.split("?", 1)[0]
                raw = self._body() if method == "POST" else b""
                try:
                    body = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw.decode("utf-8", "replace")
                gemini = GEMINI_GENERATE.match(path)
                protocol = ("openai" if path in (OPENAI_CHAT, OPENAI_MODELS) else
                            "gemini" if gemini else "other")
                headers = {name.lower(): value for name, value in self.headers.items()}
                server._record(RecordedRequest(method, self.path, headers, body, protocol, self.client_address[1]))
                if method == "GET" and path == OPENAI_MODELS:
                    self._send(200, {"object": "list", "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "chat-server"}
                        for m in server.model_ids]})
                elif method == "POST" and server.echo_key_401 and protocol != "other":
                    self._error(401, protocol, "Incorrect API key provided: "
                                f"{headers.get('authorization') or headers.get('x-goog-api-key')}")
                elif method == "POST" and path == OPENAI_CHAT and isinstance(body, dict):
                    reply = server._next_reply(body)
                    if isinstance(reply, int):
                        return self._error(reply, "openai")
                    prompt_tokens = len(request_text(body).split())
                    completion_tokens = len(reply.split())
                    self._send(200, {
                        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion",
                        "created": int(time.time()), "model": body.get("model", ""),
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                                     "logprobs": None, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                  "total_tokens": prompt_tokens + completion_tokens}})
                elif method == "POST" and gemini and isinstance(body, dict):
                    reply = server._next_reply(body)
                    if isinstance(reply, int):
                        return self._error(reply, "gemini")
                    prompt_tokens = len(request_text(body).split())
                    completion_tokens = len(reply.split())
                    self._send(200, {
                        "candidates": [{"content": {"parts": [{"text": reply}], "role": "model"},
                                        "finishReason": "STOP", "index": 0}],
                        "usageMetadata": {"promptTokenCount": prompt_tokens,
                                          "candidatesTokenCount": completion_tokens,
                                          "totalTokenCount": prompt_tokens + completion_tokens},
                        "modelVersion": gemini.group("model")})
                else:
                    self._error(404, "gemini" if path.startswith("/v1beta") else "openai")

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

        return Handler
