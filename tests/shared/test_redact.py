"""Secrets never reach a record or the console: the redaction step, and servers that quote the key back."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mmfaith.clients import ModelCallError, ModelEndpoint, ask_with_images
from mmfaith.redact import redact, redact_url

from tests.chat_server import ChatServer

SECRET = "sk-proj-Zx81SECRETkey0123456789"
ODD_SECRET = "plainlocalkey77"  # a key of no known shape: only the given secret catches it


@pytest.mark.parametrize(("text", "secrets", "expected"), [
    ("Incorrect API key provided: Bearer sk-abc123def456", (), "Incorrect API key provided: Bearer ***"),
    ("auth header 'Bearer plainlocalkey77' refused", (), "auth header 'Bearer ***' refused"),
    ("key plainlocalkey77 is wrong", (ODD_SECRET,), "key *** is wrong"),
    ("key plainlocalkey77 is wrong", (), "key plainlocalkey77 is wrong"),
    ("token hf_AbCdEfGhIjKlMnOp used", (), "token *** used"),
    ("google AIzaSyA1234567890abcdefghijklmnop rejected", (), "google *** rejected"),
    ("GET https://user:pw@example.org/v1/models failed", (), "GET https://***@example.org/v1/models failed"),
    ("POST https://x.test/v1/m:generateContent?key=SeCrEt123&alt=json", (), "POST https://x.test/v1/m:generateContent?key=***&alt=json"),
    ("HTTP 500: scripted 500", ("EMPTY",), "HTTP 500: scripted 500"),
    ("a b", ("", None, "ab"), "a b"),  # empty, missing and too-short secrets are not searched for
    # the case-blind patterns are looked for in any case (redact skips a pattern only when the case-folded text
    # holds none of the substrings its matches hold), and a Basic credential is masked only when it decodes to
    # user:password
    ("Authorization: BEARER Zx81abc", (), "Authorization: BEARER ***"),
    ("GET /v1?API_KEY=abc123&Access_Token=q9", (), "GET /v1?API_KEY=***&Access_Token=***"),
    ("Authorization: Basic dXNlcjpwYXNz sent", (), "Authorization: Basic *** sent"),
    ("Basic colours are red and blue", (), "Basic colours are red and blue"),
])
def test_redact_removes_keys_bearer_tokens_and_url_credentials(text: str, secrets: tuple, expected: str) -> None:
    assert redact(text, secrets) == expected
    assert redact(expected, secrets) == expected  # idempotent


def test_redact_url_hides_credentials_and_keeps_the_rest() -> None:
    assert redact_url("https://user:PASSWORD@host.example:8443/v1") == "https://***@host.example:8443/v1"
    assert redact_url("http://TOKEN@127.0.0.1:8000/v1") == "http://***@127.0.0.1:8000/v1"
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert redact_url("http://127.0.0.1:8000/v1?next=a@b") == "http://127.0.0.1:8000/v1?next=a@b"


def test_a_one_shot_call_refused_with_the_key_quoted_raises_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMFAITH_TEST_KEY", ODD_SECRET)
    with ChatServer(echo_key_401=True) as server:
        endpoint = ModelEndpoint("openai", "test-model", server.openai_base_url, "MMFAITH_TEST_KEY", max_retries=0)
        with pytest.raises(ModelCallError) as raised:
            ask_with_images(endpoint, "hello", [])
        assert server.completion_requests()[0].headers["authorization"] == f"Bearer {ODD_SECRET}"
    assert "401" in str(raised.value) and ODD_SECRET not in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__context__ is not None  # suppressed, not chained


@pytest.mark.parametrize("key", [SECRET, ODD_SECRET])
def test_a_key_echoed_by_a_401_never_reaches_predictions_or_the_console(mixed_build: Path, tmp_path: Path,
                                                                       key: str) -> None:
    out = tmp_path / "run"
    env = {**os.environ, "MMFAITH_TEST_KEY": key}
    with ChatServer(echo_key_401=True) as server:
        done = subprocess.run([sys.executable, "-m", "mmfaith", "run", "spd-faith", "--dataset", str(mixed_build),
                               "--model", "test-model", "--base-url", server.openai_base_url, "--out", str(out),
                               "--limit", "1", "--api-key-env", "MMFAITH_TEST_KEY", "--max-attempts", "1"],
                              capture_output=True, text=True, env=env, timeout=120)
        assert {r.headers["authorization"] for r in server.completion_requests()} == {f"Bearer {key}"}
    lines = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    errors = {line["meta"]["error"] for line in lines if line["probe"] != "describe"}  # describe waits on count
    assert errors == {"HTTP 401: Incorrect API key provided: Bearer ***"}, errors
    written = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert key not in written + done.stdout + done.stderr
    assert "Traceback" not in done.stderr
