"""The one redaction step: what mmfaith writes or prints never carries a secret.

Contract
--------
`redact(text, secrets=())` returns `text` with, each replaced by ``***``:

- every given secret (the API key in use) wherever it appears; secrets shorter than
  MIN_SECRET_CHARS are not searched for (no key is that short, and replacing them would
  mangle ordinary words);
- whatever follows ``Bearer `` (an Authorization header quoted back by a server);
- key shapes: OpenAI-style ``sk-...`` (``sk-proj-...``, ``sk-ant-...``), Hugging Face ``hf_...``
  tokens, Google ``AIza...`` keys;
- URL credentials (``https://user:pw@host/`` becomes ``https://***@host/``) and key-like query
  parameters (``?key=...``, ``api_key``, ``access_token``, ``token``).

`redact_url(url)` is the URL-credential part alone, for URLs stored as settings (run.json's
``servers``): ``https://user:pw@host/v1`` -> ``https://***@host/v1``; a URL without credentials
comes back unchanged. Both are pure functions of their arguments and idempotent.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "***"
MIN_SECRET_CHARS = 4

_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@?#]+@")
_PATTERNS = (
    (re.compile(r"(?P<keep>\bBearer\s+)[^\s'\",}]+", re.IGNORECASE), rf"\g<keep>{MASK}"),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"), MASK),
    (re.compile(r"\bhf_[A-Za-z0-9]{6,}"), MASK),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"), MASK),
    (re.compile(r"(?P<keep>[?&](?:key|api_key|apikey|access_token|token)=)[^&\s'\"#]+", re.IGNORECASE),
     rf"\g<keep>{MASK}"),
)


def redact_url(url: str) -> str:
    """`url` with its user-info (``user:pw@``) replaced by ``***@``; unchanged when it has none."""
    return _URL_CREDENTIALS.sub(rf"\g<scheme>{MASK}@", url)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` without the given secrets, bearer tokens, key shapes or URL credentials (module docstring)."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return redact_url(text)
