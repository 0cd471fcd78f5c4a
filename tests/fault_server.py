"""A faulty OpenAI-protocol chat server on 127.0.0.1, for the fault-injection tests (tests/shared/test_faults.py).

Contract
--------
`FaultServer(fault)` serves ``POST /v1/chat/completions`` (and ``GET /v1/models``) from a background
thread; use it as a context manager. Every completion request meets the same `fault`:

- ``dies``: the first completion is answered (connection closed), then the server stops listening:
  every later connection is refused;
- ``slow``: the answer "A" after SLOW_S seconds (a run to kill mid-way);
- ``echo``: a chat completion whose content quotes the request's headers and URL (a debug server
  or a logging proxy does so): the hostile case for secrets;
- ``500`` / ``429``: that HTTP status (429 with ``retry-after-ms: 10``);
- ``stall``: no answer for STALL_S seconds, then an answer;
- ``trickle``: a 200 whose body arrives one byte every TRICKLE_EVERY_S seconds, never complete;
- ``invalid-json``: a 200 whose body is not JSON;
- ``no-choices``: a 200 completion with ``choices: []``;
- ``null-content``: a completion whose message content is null;
- ``huge-content``: a completion of HUGE_CHARS characters;
- ``tool-whole-image`` / ``tool-zero-area`` / ``tool-inverted`` / ``tool-malformed``: a reply calling
  the MCoT zoom tool (in a ``<tool_call>`` tag and in ``tool_calls``) with a box of ``[0, 0, 1e9, 1e9]``, a zero-area box, an inverted box, or
  arguments that are not JSON (a family that offers no tool reads the content, "A").

`requests` counts the completion requests received.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mmfaith.background_http import BackgroundHTTP

STALL_S = 30.0
SLOW_S = 0.3
TRICKLE_EVERY_S = 2.0
HUGE_CHARS = 3_000_000
FAULTS = ("dies", "slow", "echo", "500", "429", "stall", "trickle", "invalid-json", "no-choices", "null-content", "huge-content",
          "tool-whole-image", "tool-zero-area", "tool-inverted", "tool-malformed")
TOOL_NAME = "image_zoom_in_tool"
TOOL_ARGUMENTS = {"tool-whole-image": json.dumps({"bbox_2d": [0, 0, 1e9, 1e9]}),
                  "tool-zero-area": json.dumps({"bbox_2d": [10, 10, 10, 10]}),
                  "tool-inverted": json.dumps({"bbox_2d": [50, 50, 10, 10]}),
                  "tool-malformed": "{not json"}


def completion(content: str | None, tool_arguments: str | None = None) -> dict[str, Any]:
    """A chat.completion body with one choice (and one tool call when `tool_arguments` is given)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_arguments is not None:
        message["tool_calls"] = [{"id": "call_0", "type": "function",
                                  "function": {"name": TOOL_NAME, "arguments": tool_arguments}}]
    return {"id": "chatcmpl-fault", "object": "chat.completion", "created": 0, "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_arguments else "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class FaultServer(BackgroundHTTP):
    """The faulty server (module docstring)."""

    thread_name = "fault-server"

    def __init__(self, fault: str) -> None:
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; use one of {FAULTS}")
        self.fault = fault
        self.requests = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self._stop.set()
        super().stop()

    def _close_listener(self) -> None:
        """Stop serving and close the listening socket: later connections are refused."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, json.dumps({"object": "list", "data": [{"id": "test-model", "object": "model"}]})
                           .encode())

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with server._lock:
                    server.requests += 1
                fault = server.fault
                if fault in ("500", "429"):
                    error = {"error": {"message": f"fault-server: {fault}", "type": "server_error"}}
                    return self._send(int(fault), json.dumps(error).encode(), {"retry-after-ms": "10"})
                if fault == "stall":
                    server._stop.wait(STALL_S)
                if fault == "slow":
                    server._stop.wait(SLOW_S)
                if fault == "trickle":
                    return self._trickle()
                if fault == "dies":
                    self.close_connection = True
                    self._send(200, json.dumps(completion("A")).encode(), {"Connection": "close"})
                    threading.Thread(target=server._close_listener, daemon=True).start()
                    return
                if fault == "invalid-json":
                    return self._send(200, b"{this is not json")
                body: dict[str, Any]
                if fault == "echo":
                    headers = {name: value for name, value in self.headers.items()}
                    body = completion(f"A. headers {json.dumps(headers)} url {self.path}")
                elif fault == "no-choices":
                    body = {**completion("A"), "choices": []}
                elif fault == "null-content":
                    body = completion(None)
                elif fault == "huge-content":
                    body = completion("A" * HUGE_CHARS)
                elif fault in TOOL_ARGUMENTS:
                    arguments = TOOL_ARGUMENTS[fault]
                    body = completion(f'<tool_call>{{"name": "{TOOL_NAME}", "arguments": {arguments}}}</tool_call>',
                                      arguments)
                else:
                    body = completion("A")
                self._send(200, json.dumps(body).encode())

            def _trickle(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "100000")
                self.end_headers()
                try:
                    while not server._stop.wait(TRICKLE_EVERY_S):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                except OSError:  # the client gave up
                    pass

        return Handler
