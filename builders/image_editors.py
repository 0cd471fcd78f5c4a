"""Instruction-following image editors behind their real client libraries (shared by the builders).

- `openai`: OpenAI's image edit API (`POST /v1/images/edits`, multipart: the image file, the prompt,
  the model, e.g. `gpt-image-1`) through the `openai` package; `base_url` points it at any server
  speaking that protocol (`--editor-base-url`). The answer's `b64_json` image is returned.
- `gemini`: a Gemini image model (`generateContent` with the image inline and the instruction; the
  answer's first inline image part) through `google-genai`; `base_url` for another endpoint.

Keys come from the environment variable the endpoint names (mmfaith.clients.ModelEndpoint); a
failed call raises `clients.ModelCallError` with a redacted message. Calls are retried by the
clients on 429/5xx (`max_retries`). Such editors regenerate the whole picture, often at a fixed
size: `edit_image` returns the PNG bytes the editor gave, the caller resizes them back.
"""
from __future__ import annotations

import base64

from mmfaith.clients import ModelCallError, ModelEndpoint, gemini_client, openai_client
from mmfaith.errors import MmfaithError
from mmfaith.redact import redact

EDITOR_PROVIDERS = ("openai", "gemini")


def edit_image(endpoint: ModelEndpoint, png: bytes, instruction: str) -> bytes:
    """The edited picture's bytes (PNG or another format the editor chose) for one instruction."""
    try:
        if endpoint.provider == "gemini":
            return _gemini(endpoint, png, instruction)
        return _openai(endpoint, png, instruction)
    except MmfaithError:
        raise
    except Exception as exc:  # the clients' own errors: connection, HTTP status, timeout, bad body
        raise ModelCallError(redact(f"{type(exc).__name__}: {exc}", (endpoint.api_key(),))) from None


def _openai(endpoint: ModelEndpoint, png: bytes, instruction: str) -> bytes:
    client = openai_client(endpoint)
    response = client.images.edit(model=endpoint.model, image=("image.png", png, "image/png"), prompt=instruction)
    data = response.data[0] if response.data else None
    if data is None or not data.b64_json:
        raise ValueError("the image edit answer holds no b64_json image")
    return base64.b64decode(data.b64_json)


def _gemini(endpoint: ModelEndpoint, png: bytes, instruction: str) -> bytes:
    from google.genai import types

    client = gemini_client(endpoint)
    response = client.models.generate_content(
        model=endpoint.model, contents=[types.Part.from_bytes(data=png, mime_type="image/png"), instruction],
        config=types.GenerateContentConfig(response_modalities=["IMAGE", "TEXT"]))
    for candidate in response.candidates or []:
        for part in (candidate.content.parts if candidate.content else None) or []:
            if part.inline_data is not None and part.inline_data.data:
                return part.inline_data.data
    raise ValueError("the Gemini answer holds no inline image")
