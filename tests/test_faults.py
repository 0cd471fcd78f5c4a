"""Fault injection: a faulty OpenAI-protocol server (tests/fault_server.py) driven through the real `mmfaith run`
and `score` of every family. No fault may end in a traceback, hold a run past its deadline, put a secret on
disk, or let stale predictions be scored as if they were current."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mmfaith.cli import main

from .fault_server import FaultServer

FAMILIES = ("spd-faith", "vfaith", "crm", "mcot")
BUILD_ARGS = {"spd-faith": ["--per-tier", "1"], "vfaith": ["--per-template", "1", "--templates", "color"],
              "crm": ["--max-items", "2", "--mask-style", "black"], "mcot": []}
KEY = "sk-proj-FaultKey0123456789abcdef"  # the key in use (--api-key-env)
OTHER_KEY = "plainLocalKey4242"  # OPENAI_API_KEY, set but not the one in use
PASSWORD = "s3cretPassw0rd"
QUERY_KEY = "QueryKey98765"
SECRETS = (KEY, OTHER_KEY, PASSWORD, QUERY_KEY, base64.b64encode(f"alice:{PASSWORD}".encode()).decode())


@pytest.fixture(scope="session")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One small build per family (read-only for the tests)."""
    root = tmp_path_factory.mktemp("fault-builds")
    for family, extra in BUILD_ARGS.items():
        assert main(["build", family, "--out", str(root / family), "--no-progress", *extra]) == 0
    return {family: root / family for family in FAMILIES}


def mmfaith(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m mmfaith ARGS` in a subprocess, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "mmfaith", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def run_args(family: str, build: Path, base_url: str, out: Path, *extra: str, limit: int = 1) -> list[str]:
    return ["run", family, "--dataset", str(build), "--model", "test-model", "--base-url", base_url, "--out", str(out),
            "--limit", str(limit), "--no-progress", *extra]


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def tree_digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# -- secrets -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_an_echoing_server_leaves_no_key_or_url_credential_on_disk(builds: dict[str, Path], tmp_path: Path,
                                                                    family: str) -> None:
    """The server quotes the request's headers and URL in every answer; run, score and import write none of it."""
    env = {"OPENAI_API_KEY": OTHER_KEY, "FAULT_TEST_KEY": KEY}
    run, score = tmp_path / "run", tmp_path / "score"
    with FaultServer("echo") as server:
        credentialed = server.base_url.replace("http://", f"http://alice:{PASSWORD}@")
        for name, base_url in (("plain", server.base_url), ("credentialed", credentialed + f"?api_key={QUERY_KEY}")):
            done = mmfaith(*run_args(family, builds[family], base_url, run / name, "--api-key-env", "FAULT_TEST_KEY"),
                           env=env)
            assert "Traceback" not in done.stderr, done.stderr
            printed = done.stdout + done.stderr
            assert not [s for s in SECRETS if s in printed]
    plain, with_url = run / "plain", run / "credentialed"
    echoed = "".join(line["response"] or "" for line in lines_of(plain / "predictions.jsonl"))
    assert "Bearer ***" in echoed  # the server did quote the Authorization header
    assert "Basic ***" in (with_url / "predictions.jsonl").read_text()  # user:pw@ became a Basic credential
    assert json.loads((with_url / "run.json").read_text())["servers"] == [
        f"http://***@127.0.0.1:{server.port}/v1?api_key=***"]
    done = mmfaith("score", family, "--dataset", str(builds[family]), "--predictions",
                   str(plain / "predictions.jsonl"), "--from-run", "--out", str(score), "--bootstrap", "10", env=env)
    assert "Traceback" not in done.stderr, done.stderr
    written = {p: p.read_bytes().decode("utf-8", "replace") for p in tmp_path.rglob("*") if p.is_file()}
    leaks = [(p.name, s) for p, text in written.items() for s in SECRETS if s in text]
    assert not leaks, leaks


# -- bounded time ------------------------------------------------------------------------------------


def test_a_trickling_server_cannot_hold_a_run_past_its_deadline(builds: dict[str, Path], tmp_path: Path) -> None:
    """One byte every 2 s: `--timeout 5` is a deadline for the whole attempt, so 2 attempts end in ~10 s a call."""
    out = tmp_path / "run"
    with FaultServer("trickle") as server:
        start = time.monotonic()
        done = mmfaith(*run_args("mcot", builds["mcot"], server.base_url, out, "--timeout", "5", "--max-attempts", "2"))
        elapsed = time.monotonic() - start
    assert elapsed < 60, elapsed
    assert "Traceback" not in done.stderr, done.stderr
    errors = {line["meta"]["error"] for line in lines_of(out / "predictions.jsonl")}
    assert any("timeout" in (error or "") for error in errors), errors


def test_a_server_refusing_every_connection_stops_the_run_early(builds: dict[str, Path], tmp_path: Path) -> None:
    """The server dies after one answer: after a few calls the run stops with the resume hint instead of
    failing each remaining call."""
    out = tmp_path / "run"
    with FaultServer("dies") as server:
        done = mmfaith("run", "spd-faith", "--dataset", str(builds["spd-faith"]), "--model", "test-model",
                       "--base-url", server.base_url, "--out", str(out), "--no-progress", "--max-attempts", "1",
                       "--concurrency", "1")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "reached no server" in done.stderr and "re-run the same command to resume" in done.stderr
    assert "run stopped early: 1/" in done.stderr
    assert len(lines_of(out / "predictions.jsonl")) == 4  # 1 answer and 3 failed calls, not every call of the dataset


# -- faults become recorded errors -------------------------------------------------------------------

FAULT_ERRORS = {"500": "HTTP 500", "429": "HTTP 429", "invalid-json": "malformed response",
                "no-choices": "malformed response"}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("fault", [*FAULT_ERRORS, "null-content", "huge-content"])
def test_a_faulty_server_gives_recorded_errors_never_a_traceback(builds: dict[str, Path], tmp_path: Path,
                                                                 family: str, fault: str) -> None:
    out = tmp_path / "run"
    with FaultServer(fault) as server:
        start = time.monotonic()
        done = mmfaith(*run_args(family, builds[family], server.base_url, out, "--max-attempts", "2",
                                 "--timeout", "10"))
    assert time.monotonic() - start < 60
    assert "Traceback" not in done.stderr and done.returncode in (0, 1), done.stderr
    lines = lines_of(out / "predictions.jsonl")
    assert lines
    if fault in FAULT_ERRORS:
        assert all(line["response"] is None for line in lines)
        assert all(FAULT_ERRORS[fault] in line["meta"]["error"] or "failed" in line["meta"]["error"]
                   for line in lines), {line["meta"]["error"] for line in lines}
    for line in lines:  # every line carries its settings and what its item showed
        assert line["meta"]["generation"]["max_tokens"] == 1024 and len(line["meta"]["shown_sha256"]) == 64


@pytest.mark.parametrize("fault", ["tool-whole-image", "tool-zero-area", "tool-inverted", "tool-malformed"])
def test_bad_mcot_tool_calls_are_recorded_never_the_end_of_the_run(builds: dict[str, Path], tmp_path: Path,
                                                                    fault: str) -> None:
    out = tmp_path / "run"
    with FaultServer(fault) as server:
        done = mmfaith(*run_args("mcot", builds["mcot"], server.base_url, out, "--max-turns", "2", limit=2))
    assert "Traceback" not in done.stderr, done.stderr
    lines = lines_of(out / "predictions.jsonl")
    assert {line["id"] for line in lines} and len({line["id"] for line in lines}) == 2  # both items recorded
    calls = [call for line in lines if line["probe"] == "trace" and line["response"] is not None
             for turn in line["meta"]["trace"]["turns"] for call in turn["tool_calls"]]
    if fault == "tool-zero-area":
        assert calls and all("zero width or height" in call["error"] for call in calls)
    if fault == "tool-inverted":
        assert calls and all(call.get("box_inverted") for call in calls)
    if fault == "tool-whole-image":  # whatever becomes of the crop, each item ends answered or with its error
        assert all(line["response"] is not None or line["meta"]["error"] for line in lines)
