"""Before a run's first call: is each `--base-url` an OpenAI-compatible server, and does it serve the model?

Contract (`check_endpoint(base_url, model, api_key, timeout_s) -> list[str]`)
------------------------------------------------------------------------------
- The URL needs an http or https scheme and a host; otherwise MmfaithError naming the flag.
- GET {base_url}/models: unreachable, a 404 (the usual sign of a base URL without `/v1`), a 401
  or 403 (a wrong or missing key) -> MmfaithError with the hint; every call of the run would fail.
- A model list that does not name `model` (compared with and without the `models/` prefix that
  Gemini's names carry) is a warning, not a refusal: some servers list only part of what they
  serve. Any other answer (a 5xx, a body that is no model list) is a warning too.
- Returns the warnings; the key is sent, never printed (every message passes through `redact`).
"""
from __future__ import annotations

from urllib.parse import urlsplit

from mmfaith.errors import MmfaithError
from mmfaith.redact import redact, redact_url

HINTS = {
    401: "check the key (OPENAI_API_KEY or --api-key-env)",
    403: "check the key (OPENAI_API_KEY or --api-key-env) and its access to this model",
    404: "an OpenAI-compatible base URL usually ends in /v1, e.g. http://HOST:8000/v1; check --base-url and --model",
}


def check_endpoint(base_url: str, model: str, api_key: str, timeout_s: float = 10.0) -> list[str]:
    """Check one base URL as the module docstring says; return warnings, raise for what no call can survive."""
    # httpx2, as the chat client: plain httpx would add its CLI's imports (click, rich) to every run.
    import httpx2 as http

    from mmfaith.evaluators.chat_client import tls_context
    shown = redact_url(base_url)
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise MmfaithError(f"--base-url {shown}: not an http(s) URL with a host; give e.g. http://127.0.0.1:8000/v1.")
    url = base_url.rstrip("/") + "/models"
    try:
        response = http.get(url, headers={"Authorization": f"Bearer {api_key}"}, timeout=timeout_s,
                            verify=tls_context())
    except http.HTTPError as exc:
        raise MmfaithError(f"--base-url {shown}: cannot reach {redact_url(url)} "
                           f"({redact(str(exc) or type(exc).__name__, (api_key,))}); is the server running?") from exc
    if response.status_code in HINTS:
        raise MmfaithError(f"--base-url {shown}: GET /models answered HTTP {response.status_code}; "
                           f"{HINTS[response.status_code]}.")
    if response.status_code != 200:
        return [f"GET {redact_url(url)} answered HTTP {response.status_code}; going on without checking the model"]
    try:
        listed = [entry["id"] for entry in response.json()["data"] if isinstance(entry.get("id"), str)]
    except (ValueError, KeyError, TypeError, AttributeError):
        return [f"GET {redact_url(url)} gave no model list; going on without checking the model"]
    names = {name.removeprefix("models/") for name in listed}
    if model.removeprefix("models/") not in names:
        some = ", ".join(sorted(names)[:5]) + (" ..." if len(names) > 5 else "")
        return [f"model {model!r} is not among the {len(names)} listed at {redact_url(url)} ({some or 'none'}); "
                "going on, since some servers list only part of what they serve"]
    return []
