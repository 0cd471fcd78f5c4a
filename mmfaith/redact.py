"""The one redaction step: what mmfaith writes or prints never carries a secret.

Contract
--------
`redact(text, secrets=())` returns `text` with, each replaced by ``***``:

- every given secret (the API key in use) wherever it appears; secrets shorter than
  MIN_SECRET_CHARS are not searched for (no key is that short, and replacing them would
  mangle ordinary words);
- every secret in use in this process (`secrets_in_use`: OPENAI_API_KEY, and each secret a verb
  registered with `register_secret`: the variable of ``--api-key-env``, a base URL's user-info and
  key-like query values), so a writer need not pass them;
- whatever follows ``Bearer `` (an Authorization header quoted back by a server), and a ``Basic``
  credential (base64 of ``user:password``);
- key shapes: OpenAI-style ``sk-...`` (``sk-proj-...``, ``sk-ant-...``), Hugging Face ``hf_...``
  tokens, Google ``AIza...`` keys;
- URL credentials (``https://user:pw@host/`` becomes ``https://***@host/``) and key-like query
  parameters (``?key=...``, ``api_key``, ``access_token``, ``token``).

`redact_url(url)` is the URL part alone, for URLs stored as settings (run.json's ``servers``):
``https://user:pw@host/v1?api_key=K`` -> ``https://***@host/v1?api_key=***``; a URL without
credentials comes back unchanged. `url_secrets(url)` lists a URL's password and key-like
query values (what `register_secret` should learn from a ``--base-url``). `redact_record(value)`
redacts every string inside a JSON value (a prediction line, run.json) and returns a copy.

Every file mmfaith writes passes through `redact` at its writer: `jsonl.JsonlAppender` (every
journal and predictions.jsonl), `jsonl.write_text_atomic` (run.json, score dirs, reports,
exports). All functions are idempotent.
"""
from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

MASK = "***"
MIN_SECRET_CHARS = 4

KEY_ENV = "OPENAI_API_KEY"
KEY_PARAMETERS = ("key", "api_key", "apikey", "access_token", "token")
_registered: set[str] = set()
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@?#]+@")
_KEY_PARAMETER = re.compile(rf"(?P<keep>[?&](?:{'|'.join(KEY_PARAMETERS)})=)[^&\s'\"#\\]+", re.IGNORECASE)
_BASIC = re.compile(r"(?P<keep>\bBasic\s+)(?P<credential>[A-Za-z0-9+/]{4,}={0,2})")
_PATTERNS = (  # (pattern, replacement, the substrings one of which every match holds: `_sub`)
    (re.compile(r"(?P<keep>\bBearer\s+)[^\s'\",}\\]+", re.IGNORECASE), rf"\g<keep>{MASK}", ("bearer",)),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"), MASK, ("sk-",)),
    (re.compile(r"\bhf_[A-Za-z0-9]{6,}"), MASK, ("hf_",)),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"), MASK, ("AIza",)),
    (_KEY_PARAMETER, rf"\g<keep>{MASK}", ("key=", "token=")),  # every KEY_PARAMETERS name ends in key or token
)


_CASE_BLIND = frozenset(pattern for pattern in (_URL_CREDENTIALS, _KEY_PARAMETER, _BASIC, *(p for p, _, _ in _PATTERNS))
                        if pattern.flags & re.IGNORECASE)
"""The patterns whose needles `_sub` looks for in the case-folded text (the flag test itself is an enum operation,
too dear to repeat for every string written)."""


def register_secret(*values: str | None) -> None:
    """Make `redact` remove these values from everything this process writes or prints from now on."""
    _registered.update(value for value in values if value and len(value) >= MIN_SECRET_CHARS)


def secrets_in_use() -> set[str]:
    """The secrets `redact` always removes: OPENAI_API_KEY's value and every registered secret."""
    return {*_registered, *([os.environ[KEY_ENV]] if os.environ.get(KEY_ENV) else [])}


def url_secrets(url: str) -> list[str]:
    """A URL's password and key-like query values (``pw`` and ``K`` of ``//user:pw@h/?api_key=K``); the user
    name is no secret (a common word: masking it everywhere would mangle text), its ``user:pw@`` form is."""
    try:
        parts = urlsplit(url)
        found = [parts.password]
    except ValueError:
        return []
    found += [value for name, value in parse_qsl(parts.query) if name.lower() in KEY_PARAMETERS]
    return [unquote(value) for value in found if value]


def redact_url(url: str) -> str:
    """`url` with its user-info and key-like query values replaced by ``***``; unchanged when it has none."""
    without_user = _sub(_URL_CREDENTIALS, rf"\g<scheme>{MASK}@", url, ("://",))
    return _sub(_KEY_PARAMETER, rf"\g<keep>{MASK}", without_user, ("key=", "token="))


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` without the given secrets, the secrets in use, bearer and basic credentials, key shapes or URL
    credentials (module docstring)."""
    return _redact(text, _longest_first(secrets))


def _longest_first(secrets: Iterable[str | None]) -> tuple[str, ...]:
    """The given secrets long enough to search for and the secrets in use, longest first (a secret inside
    another is then never replaced first)."""
    given = {s for s in secrets if s and len(s) >= MIN_SECRET_CHARS} | secrets_in_use()
    return tuple(sorted(given, key=len, reverse=True))


def _redact(text: str, secrets: tuple[str, ...]) -> str:
    """`redact` with its secrets already gathered (`_longest_first`)."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    for pattern, replacement, needles in _PATTERNS:
        text = _sub(pattern, replacement, text, needles)
    return redact_url(_sub(_BASIC, _mask_basic, text, ("Basic",)))


def _sub(pattern: re.Pattern[str], replacement: str | Callable[[re.Match[str]], str], text: str,
         needles: tuple[str, ...]) -> str:
    """`pattern.sub(replacement, text)`, skipped when the text holds none of `needles` (substrings one of which
    every match holds; searched case-folded for an IGNORECASE pattern): a scan for a substring costs a small
    share of the pattern's own (a score dir's items.jsonl is tens of MB with no secret in it)."""
    haystack = text.casefold() if pattern in _CASE_BLIND else text
    return pattern.sub(replacement, text) if any(needle in haystack for needle in needles) else text


def redact_record(value: Any, secrets: Iterable[str | None] = ()) -> Any:
    """A copy of a JSON value with every string in it (keys aside) passed through `redact`."""
    return _redact_value(value, _longest_first(secrets))


def _redact_value(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return _redact(value, secrets)
    if isinstance(value, dict):
        return {key: _redact_value(item, secrets) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact_value(item, secrets) for item in value]
    return value


def _mask_basic(match: re.Match[str]) -> str:
    """A ``Basic`` credential masked when it decodes to ``user:password``; ordinary words after "Basic" kept."""
    credential = match.group("credential")
    try:
        decoded = base64.b64decode(credential + "=" * (-len(credential) % 4), validate=True)
    except (binascii.Error, ValueError):
        return match.group(0)
    return match.group("keep") + MASK if b":" in decoded else match.group(0)
