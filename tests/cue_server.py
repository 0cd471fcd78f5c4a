"""A local server for VFaith's cue-driven path that speaks the real wire protocols and does real work.

`CueServer()` binds 127.0.0.1 on a free port (a background thread; a context manager) and serves:
- ``POST /v1/chat/completions`` (OpenAI chat completions) for the three chat roles, told apart by
  their prompts (builders/vfaith/cue_driven.py): the reasoner looks at the image and marks cues
  (`<vcues_1>the square is COLOR</vcues_1>`, the square's colour read from its pixels, and the
  background), the suggester proposes recolouring the square to the next option's colour with its
  box, the judge passes it. Scripted faults: `garbage_suggestions` (row questions whose first
  suggestion is not JSON), `failing_judgements` (questions whose first verdict is FAIL).
- ``POST /v1/images/edits`` (OpenAI's multipart image edit: `image` file, `prompt`, `model`): the
  instruction names a box and a colour ("Paint the square in box [x, y, w, h] COLOR"); the server
  paints that box's pixels that differ from the background, then answers the whole picture at a
  fixed 512 x 512 size, as regenerating editors do (`b64_json`). `edit_failures` answers the first N
  edit requests with HTTP 500 (the client retries).
- ``POST /{version}/models/{model}:generateContent`` (Gemini): the same edit, answered as an inline
  image part.
Every request is recorded in `requests` as (path, protocol).
"""
from __future__ import annotations

import base64
import io
import json
import re
import threading
import time
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
from PIL import Image

from mmfaith.background_http import BackgroundHTTP
from mmfaith.builders.colors import COLOR_PROTOTYPES_RGB, object_color

SQUARE = re.compile(r"box \[(\d+), (\d+), (\d+), (\d+)\] (\w+)")


def square_box(rgb: np.ndarray) -> tuple[int, int, int, int]:
    """The box of the pixels that differ from the top-left (background) pixel."""
    ys, xs = np.nonzero(np.any(rgb != rgb[0, 0], axis=-1))
    return int(xs.min()), int(ys.min()), int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)


def paint(png: bytes, instruction: str) -> bytes:
    """The real edit: the named box's non-background pixels painted the named colour; 512 x 512 PNG out."""
    rgb = np.array(Image.open(io.BytesIO(png)).convert("RGB"))
    match = SQUARE.search(instruction)
    if match:
        x, y, w, h = (int(v) for v in match.groups()[:4])
        region = np.zeros(rgb.shape[:2], dtype=bool)
        region[y:y + h, x:x + w] = True
        region &= np.any(rgb != rgb[0, 0], axis=-1)
        rgb[region] = COLOR_PROTOTYPES_RGB[match.group(5)]
    out = io.BytesIO()
    Image.fromarray(rgb).resize((512, 512), Image.Resampling.LANCZOS).save(out, format="PNG")
    return out.getvalue()


class CueServer(BackgroundHTTP):
    thread_name = "cue-server"

    def __init__(self, garbage_suggestions: set[str] = frozenset(), failing_judgements: set[str] = frozenset(),
                 edit_failures: int = 0) -> None:
        self.garbage, self.failing, self.edit_failures = set(garbage_suggestions), set(failing_judgements), edit_failures
        self.requests: list[tuple[str, str]] = []
        self._seen: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _count(self, role: str, question: str) -> int:
        with self._lock:
            self._seen[(role, question)] = self._seen.get((role, question), 0) + 1
            return self._seen[(role, question)]

    def chat(self, text: str, image: bytes) -> str:
        question = re.search(r"Question: (.*)", text).group(1).strip()
        options = dict(re.findall(r"^([A-Z])\. (\w+)$", text, flags=re.MULTILINE))
        rgb = np.asarray(Image.open(io.BytesIO(image)).convert("RGB"))
        box = square_box(rgb)
        mask = np.zeros(rgb.shape[:2], dtype=bool)
        mask[box[1]:box[1] + box[3], box[0]:box[0] + box[2]] = True
        color = object_color(rgb, mask).name
        if "<vcues_1>" in text:  # the reasoner
            label = next((k for k, v in options.items() if v == color), "A")
            return (f"The <vcues_1>the square is {color}</vcues_1> and it sits on <vcues_2>a gray background"
                    f"</vcues_2> next to <vcues_3>nothing else</vcues_3>. \\boxed{{{label}}}")
        if "Propose ONE edit" in text:  # the suggester
            if question in self.garbage and self._count("suggest", question) == 1:
                return "I would rather not say."
            target = next(k for k, v in options.items() if v != color)
            return json.dumps({"cue": 1, "instruction": f"Paint the square in box [{box[0]}, {box[1]}, {box[2]}, "
                                                        f"{box[3]}] {options[target]}",
                               "target_answer": target, "cue_after": f"the square is {options[target]}",
                               "box": list(box)})
        if "PASS or FAIL" in text:  # the judge
            if question in self.failing and self._count("judge", question) == 1:
                return "FAIL: the edit would change the background too."
            return "PASS: only the square changes, and the named colour becomes the answer."
        raise ValueError("not a prompt of the cue-driven pipeline")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _edit_allowed(self) -> bool:
                with server._lock:
                    if server.edit_failures > 0:
                        server.edit_failures -= 1
                        return False
                return True

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/v1/chat/completions":
                    server.requests.append((self.path, "openai-chat"))
                    request = json.loads(body)
                    parts = request["messages"][-1]["content"]
                    text = "\n".join(p["text"] for p in parts if p["type"] == "text")
                    image = base64.b64decode(next(p for p in parts if p["type"] == "image_url")
                                             ["image_url"]["url"].split(",", 1)[1])
                    answer = server.chat(text, image)
                    self._send(200, {"id": "c1", "object": "chat.completion", "created": int(time.time()),
                                     "model": request["model"], "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": answer}}],
                                     "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
                elif self.path == "/v1/images/edits":
                    server.requests.append((self.path, "openai-images-edits"))
                    if not self._edit_allowed():
                        self._send(500, {"error": {"message": "editor overloaded", "type": "server_error",
                                                   "param": None, "code": None}})
                        return
                    message = BytesParser().parsebytes(
                        b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + body)
                    fields = {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                              for part in message.get_payload()}
                    edited = paint(fields["image"], fields["prompt"].decode())
                    self._send(200, {"created": int(time.time()),
                                     "data": [{"b64_json": base64.b64encode(edited).decode()}]})
                elif self.path.endswith(":generateContent"):
                    server.requests.append((self.path, "gemini"))
                    if not self._edit_allowed():
                        self._send(500, {"error": {"code": 500, "message": "overloaded", "status": "INTERNAL"}})
                        return
                    parts = json.loads(body)["contents"][0]["parts"]
                    inline = next(p.get("inlineData") or p.get("inline_data") for p in parts
                                  if "inlineData" in p or "inline_data" in p)
                    data = inline["data"]  # google-genai sends base64url, maybe unpadded
                    image = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
                    text = "\n".join(p["text"] for p in parts if "text" in p)
                    edited = paint(image, text)
                    self._send(200, {"candidates": [{"content": {"role": "model", "parts": [
                        {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(edited).decode()}}]},
                        "finishReason": "STOP", "index": 0}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

        return Handler
