"""A real HTTP server speaking the OpenAI chat-completions protocol for the reference models.

Contract
--------
`ReferenceServer(dataset, model, family=NAME, host="127.0.0.1", port=0, latency_s=0.0)`
serves one reference model of a registered family (`model` a name: the family's
`reference_model(name, dataset)`, a `run_engine.ReferenceModel`; or a model given whole, such as
`suite_reference.SuiteReferenceModel`, with `family` None) from threads (stdlib ThreadingHTTPServer, HTTP/1.1 keep-alive, a
deep accept queue), as a context manager (`with ReferenceServer(...) as server: server.base_url`)
or in the foreground (`serve_forever`, Ctrl-C stops it). The server is family-neutral: the model
resolves each request to its (item, probe) from what the request shows (image hashes, prompt
text) and answers it.

- ``POST /v1/chat/completions``: the request's images are base64 data URLs, decoded in order and
  handed to the model with the text parts. The model answers with text, or with a whole assistant
  message (a dict with `content` and `tool_calls`: OpenAI function calling, finish_reason
  "tool_calls"). The answer is a `chat.completion` with usage (prompt
  tokens estimated as a run's dry run does, completion tokens at 4 characters each) and
  finish_reason "stop", after `latency_s` (a simulated model time, for load tests).
- ``GET /v1/models`` lists the model; ``GET /health`` answers 200.
- Requests for another model get 404; requests the model cannot resolve (images not in the
  dataset, a text that is no probe) or a body that is not a chat request get 400; all with
  OpenAI's error body ``{"error": {"message", "type", "param", "code"}}``.
"""
from __future__ import annotations

import base64
import binascii
import json
import math
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mmfaith import families
from mmfaith.background_http import BackgroundHTTP
from mmfaith.evaluators.chat_client import TEXT_CHARS_PER_TOKEN, estimate_prompt_tokens
from mmfaith.images import image_size
from mmfaith.evaluators.run_engine import EvalDataset, ReferenceModel

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
HEALTH_PATH = "/health"
_DATA_URL_PREFIX = "data:image/"


class RequestRefused(Exception):
    """A request the server answers with an error status and OpenAI's error body."""

    def __init__(self, status: int, message: str, error_type: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # the accept backlog: many clients connect at once


class ReferenceServer(BackgroundHTTP):
    """One reference model over one dataset on 127.0.0.1 (see the module docstring)."""

    thread_name = "reference-server"

    def __init__(self, dataset: EvalDataset | None, model_name: str | ReferenceModel, *, family: str | None = None,
                 host: str = "127.0.0.1", port: int = 0, latency_s: float = 0.0) -> None:
        if isinstance(model_name, str) and family is None:
            raise ValueError("ReferenceServer: a model named by its name needs the family= it belongs to")
        self.model = (families.get(family).parts().reference_model(model_name, dataset) if isinstance(model_name, str)
                      else model_name)
        self.host = host
        self.latency_s = latency_s
        self._lock = threading.Lock()
        self.requests_seen = 0
        self._httpd = _Server((host, port), self._handler_class())

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (root + /v1)."""
        return f"http://{self.host}:{self.port}/v1"

    # -- answering -------------------------------------------------------------------------------

    def complete(self, body: Any) -> dict[str, Any]:
        """The chat.completion for one request body; raises RequestRefused for a bad request."""
        with self._lock:
            self.requests_seen += 1
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise RequestRefused(400, "the body must be a JSON object with a 'messages' list")
        if body.get("model") != self.model.name:
            raise RequestRefused(404, f"The model `{body.get('model')}` does not exist; this server serves "
                                      f"`{self.model.name}`.", "not_found_error")
        text, images = _text_and_images(body["messages"])
        answer = self.model.answer(text, images, body)
        # A model may answer with a whole assistant message: {"content": ..., "tool_calls": [...]}.
        message = {"role": "assistant", **answer} if isinstance(answer, dict) else {"role": "assistant", "content": answer}
        content = message.get("content") or ""
        if self.latency_s:
            time.sleep(self.latency_s)
        prompt_tokens = estimate_prompt_tokens(text, [image_size(image) for image in images])
        completion_tokens = math.ceil(len(content) / TEXT_CHARS_PER_TOKEN)
        return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
                "model": self.model.name,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet: tests and load runs
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _refuse(self, refused: RequestRefused) -> None:
                self._send(refused.status, {"error": {"message": str(refused), "type": refused.error_type,
                                                      "param": None, "code": None}})

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == HEALTH_PATH:
                    self._send(200, {"status": "ok"})
                elif path == MODELS_PATH:
                    self._send(200, {"object": "list", "data": [
                        {"id": server.model.name, "object": "model", "created": 0, "owned_by": "mmfaith"}]})
                else:
                    self._refuse(RequestRefused(404, f"no route {path}", "not_found_error"))

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.split("?", 1)[0] != CHAT_PATH:
                    return self._refuse(RequestRefused(404, f"no route {self.path}", "not_found_error"))
                try:
                    body = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    return self._refuse(RequestRefused(400, "the body is not valid JSON"))
                try:
                    self._send(200, server.complete(body))
                except RequestRefused as refused:
                    self._refuse(refused)

        return Handler


def _text_and_images(messages: list[Any]) -> tuple[str, list[bytes]]:
    """All text parts joined by newlines, and the decoded bytes of every image, in order."""
    texts: list[str] = []
    images: list[bytes] = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content if isinstance(content, list) else []:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                texts.append(str(part.get("text", "")))
            elif part.get("type") == "image_url":
                url = part.get("image_url")
                images.append(_data_url_bytes(url.get("url") if isinstance(url, dict) else url))
    return "\n".join(texts), images


def _data_url_bytes(url: Any) -> bytes:
    if not isinstance(url, str) or not url.startswith(_DATA_URL_PREFIX) or ";base64," not in url:
        raise RequestRefused(400, "images must be base64 data URLs (data:image/png;base64,...)")
    try:
        return base64.b64decode(url.split(";base64,", 1)[1], validate=True)
    except binascii.Error as exc:
        raise RequestRefused(400, f"an image's base64 data is malformed ({exc})") from exc
