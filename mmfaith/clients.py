"""Blocking one-shot calls to a chat model with images: OpenAI-compatible servers or Gemini.

Used where a build step asks a model once per item (the LLM planner) and by the LLM judge. Keys
come from the environment variable the user names and are never printed or stored: a failed call
raises `ModelCallError`, whose message (the client's exception type and text) has passed through
`mmfaith.redact.redact` with the key, so a server quoting the key back cannot put it in a record.

One client per endpoint (`openai_client`, `gemini_client`): planners, judges and editors that call
an endpoint thousands of times share one client, so its connections are reused; a changed key in
the environment makes a new one.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import threading
from dataclasses import dataclass
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.redact import redact

PROVIDERS = ("openai", "gemini")
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"}
GEMINI_HINT = "Gemini needs the google-genai package: pip install 'mmfaith[gemini]'."


def _installed(module: str) -> bool:
    """Whether `module` (dotted) can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a missing parent package
        return False


@dataclass(frozen=True)
class ModelEndpoint:
    """Which model to ask and where; `api_key_env` names the variable that holds the key."""

    provider: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 3

    def __post_init__(self) -> None:
        """A gemini endpoint needs google-genai (the `gemini` extra): one MmfaithError line when it is missing."""
        if self.provider == "gemini" and not _installed("google.genai"):
            raise MmfaithError(GEMINI_HINT)

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env or DEFAULT_KEY_ENV[self.provider])


class ModelCallError(RuntimeError):
    """A model call failed (connection, HTTP status, timeout); the message is redacted."""


def failure_text(exc: BaseException) -> str:
    """One line for a failed call or a bad answer: `ModelCallError`'s own (redacted) message, else type and text."""
    return str(exc) if isinstance(exc, ModelCallError) else f"{type(exc).__name__}: {exc}"


def first_json_object(text: str) -> Any:
    """The first JSON object in a model's answer (inside a code fence if there is one); ValueError if none."""
    fenced = re.search(r"```(?:json)?\s*(\{.*?)```", text, flags=re.DOTALL)
    body = fenced.group(1) if fenced else text
    start = body.find("{")
    if start < 0:
        raise ValueError("no JSON object in the answer")
    return json.JSONDecoder().raw_decode(body, start)[0]


def ask_with_images(endpoint: ModelEndpoint, text: str, images_png: list[bytes], max_tokens: int = 1024) -> str:
    """The model's text answer to one user turn of images then text (temperature 0).

    Raises MmfaithError for a setup problem (missing package or key), ModelCallError for a failed call.
    """
    try:
        if endpoint.provider == "gemini":
            return _ask_gemini(endpoint, text, images_png, max_tokens)
        return _ask_openai(endpoint, text, images_png, max_tokens)
    except MmfaithError:
        raise
    except Exception as exc:  # the clients' own errors: connection, HTTP status, timeout, bad body
        raise ModelCallError(redact(f"{type(exc).__name__}: {exc}", (endpoint.api_key(),))) from None


_CLIENTS: dict[tuple[ModelEndpoint, str | None], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _shared_client(endpoint: ModelEndpoint, make: Any) -> Any:
    """The one client of this endpoint and key in this process, made by `make(endpoint)` on first use."""
    key = (endpoint, endpoint.api_key())
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = make(endpoint)
        return _CLIENTS[key]


def openai_client(endpoint: ModelEndpoint) -> Any:
    """The `openai.OpenAI` client of the endpoint (its base URL, key, timeout and retries), one per process."""
    import openai

    return _shared_client(endpoint, lambda e: openai.OpenAI(base_url=e.base_url, api_key=e.api_key() or "EMPTY",
                                                            timeout=e.timeout_s, max_retries=e.max_retries))


def _ask_openai(endpoint: ModelEndpoint, text: str, images_png: list[bytes], max_tokens: int) -> str:
    from mmfaith.images import data_url

    client = openai_client(endpoint)
    content: list[dict[str, object]] = [{"type": "image_url", "image_url": {"url": data_url(png)}}
                                        for png in images_png]
    content.append({"type": "text", "text": text})
    response = client.chat.completions.create(model=endpoint.model, temperature=0.0, max_tokens=max_tokens,
                                              messages=[{"role": "user", "content": content}])
    return response.choices[0].message.content or ""


def gemini_client(endpoint: ModelEndpoint) -> Any:
    """The `google.genai.Client` of the endpoint (its key, timeout, retries and base URL), one per process;
    MmfaithError when the package or the key is missing."""
    return _shared_client(endpoint, _new_gemini_client)


def _new_gemini_client(endpoint: ModelEndpoint) -> Any:
    try:
        from google import genai
        from google.genai import types
    except ImportError as exc:
        raise MmfaithError(GEMINI_HINT) from exc
    key = endpoint.api_key()
    if not key:
        raise MmfaithError(f"Gemini needs an API key in ${endpoint.api_key_env or DEFAULT_KEY_ENV['gemini']}.")
    options = types.HttpOptions(timeout=int(endpoint.timeout_s * 1000),
                                retry_options=types.HttpRetryOptions(attempts=endpoint.max_retries + 1))
    if endpoint.base_url:
        options.base_url = endpoint.base_url
    return genai.Client(api_key=key, http_options=options)


def _ask_gemini(endpoint: ModelEndpoint, text: str, images_png: list[bytes], max_tokens: int) -> str:
    from google.genai import types

    client = gemini_client(endpoint)
    parts = [types.Part.from_bytes(data=png, mime_type="image/png") for png in images_png]
    response = client.models.generate_content(
        model=endpoint.model, contents=[*parts, text],
        config=types.GenerateContentConfig(temperature=0.0, max_output_tokens=max_tokens))
    return response.text or ""
