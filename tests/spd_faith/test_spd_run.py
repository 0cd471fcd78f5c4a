"""The run loop over real HTTP: resume after SIGKILL, retries, failures, dry run, encodings, the key.

Servers are real: the reference server (in a thread) and, for failures, `FlakyServer` below,
a small chat server whose answers follow a script per probe (an HTTP status with or without
Retry-After, a sleep past the client's timeout, a malformed body, or an answer). Nothing is mocked.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mmfaith.errors import MmfaithError
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.evaluators.answers import read_count
from mmfaith.evaluators.spd_faith.prompts import PROBES, probe_of_prompt, prompt_text
from mmfaith.evaluators.spd_faith.run import RunRequest, run_spd_faith
from mmfaith.loaders.spd_faith.dataset import SpdDataset, open_spd_dataset
from mmfaith.schema import schema_errors

from tests.conftest import kill_after_lines, read_records
from tests.shared.test_reference_server import answers, prediction_lines, run_against

Step = tuple[Any, ...]
OK = ("ok", "I compare them.\n```json\n[]\n```\n\\boxed{2}")
SECRET = "sk-test-SECRET-4f1c9e"


class FlakyServer:
    """A real chat-completions server whose answer to each probe follows `script[probe]`, then `default`.

    Steps: ("ok", text); ("status", code) or ("status", code, retry_after_header);
    ("sleep", seconds) (then answers, long after the client gave up); ("malformed",) (200 with a
    body that is not JSON). Records (time, probe, authorization header) of every request.
    """

    def __init__(self, script: dict[str, Iterable[Step]], default: Step = OK) -> None:
        self.script = {probe: list(steps) for probe, steps in script.items()}
        self.default = default
        self.seen: list[tuple[float, str, str]] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def times(self, probe: str) -> list[float]:
        return [t for t, p, _ in self.seen if p == probe]

    def __enter__(self) -> FlakyServer:
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _step(self, probe: str, authorization: str) -> Step:
        with self._lock:
            self.seen.append((time.monotonic(), probe, authorization))
            steps = self.script.get(probe, [])
            return steps.pop(0) if steps else self.default

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _reply(self, status: int, data: bytes, headers: dict[str, str]) -> None:
                try:
                    self.send_response(status)
                    for name, value in {"Content-Type": "application/json", "Content-Length": str(len(data)),
                                        **headers}.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = body["messages"][0]["content"][-1]["text"]
                step = server._step(probe_of_prompt(text) or "?", self.headers.get("Authorization", ""))
                if step[0] == "status":
                    headers = {"Retry-After": step[2]} if len(step) > 2 else {}
                    error = {"error": {"message": f"scripted {step[1]}", "type": "server_error", "param": None,
                                       "code": None}}
                    return self._reply(step[1], json.dumps(error).encode(), headers)
                if step[0] == "malformed":
                    return self._reply(200, b'{"id": "chatcmpl-1", "choices": [{"mess', {})
                if step[0] == "sleep":
                    time.sleep(step[1])
                    step = OK
                completion = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                              "choices": [{"index": 0, "finish_reason": "stop",
                                           "message": {"role": "assistant", "content": step[1],
                                                       "reasoning_content": "thinking apart"}}],
                              "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
                self._reply(200, json.dumps(completion).encode(), {})

        return Handler


def flaky_run(server: FlakyServer, dataset: Path, out: Path, **options: Any) -> Any:
    settings = {"limit": 1, "timeout_s": 0.4, "max_attempts": 4, "backoff_s": 0.01, "progress": False, **options}
    return run_spd_faith(RunRequest(dataset=dataset, model="flaky", base_urls=(server.base_url,), out=out, **settings))


def answered_counts(run_dir: Path) -> Counter:
    return Counter((line["id"], line["probe"]) for line in prediction_lines(run_dir) if line["response"] is not None)


@pytest.fixture(scope="module")
def dataset(mixed_build: Path) -> SpdDataset:
    return open_spd_dataset(mixed_build)


# -- resume ----------------------------------------------------------------------------------------

def _settled_requests(server: ReferenceServer, quiet_s: float = 0.5, timeout_s: float = 30) -> int:
    """The server's request count once none has come for `quiet_s`: a request the killed client sent just before
    the kill may reach a handler thread (and the count) a moment later, and must not be taken for the resume's."""
    deadline, seen, since = time.monotonic() + timeout_s, server.requests_seen, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet_s:
        time.sleep(0.02)
        if server.requests_seen != seen:
            seen, since = server.requests_seen, time.monotonic()
    return seen


def test_a_killed_run_resumes_without_asking_twice_or_losing_anything(dataset: SpdDataset, mixed_build: Path,
                                                                    tmp_path: Path) -> None:
    complete, interrupted = tmp_path / "complete", tmp_path / "interrupted"
    expected = len(read_records(mixed_build)) * len(PROBES)  # every pair's probes
    with ReferenceServer(dataset, "oracle", family="spd-faith", latency_s=0.04) as server:
        run_against(server, mixed_build, complete, concurrency=4)
        code = (f"from pathlib import Path\nfrom mmfaith.evaluators.spd_faith.run import RunRequest, run_spd_faith\n"
                f"run_spd_faith(RunRequest(dataset=Path({str(mixed_build)!r}), model='oracle', "
                f"base_urls=({server.base_url!r},), out=Path({str(interrupted)!r}), concurrency=2, progress=False))")
        process = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
        predictions = interrupted / "predictions.jsonl"
        killed_at = kill_after_lines(process, predictions, 10, timeout_s=60)  # a torn line is repaired on resume
        assert 10 <= killed_at < expected
        requests_before = _settled_requests(server)
        summary = run_against(server, mixed_build, interrupted, concurrency=2)
        resumed_requests = server.requests_seen - requests_before

    assert (summary.answered, summary.failed) == (expected, 0)
    assert resumed_requests == summary.requests == expected - killed_at  # answered calls are not asked again
    assert max(answered_counts(interrupted).values()) == 1
    done, reference = answers(interrupted), answers(complete)
    assert done.keys() == reference.keys()
    assert {k: v["response"] for k, v in done.items()} == {k: v["response"] for k, v in reference.items()}
    run = json.loads((interrupted / "run.json").read_text())
    assert len(run["sessions"]) == 2 and run["counts"] == {"expected": expected, "answered": expected, "skipped": 0,
                                                        "failed": 0}


def test_a_run_dir_of_other_settings_is_refused(dataset: SpdDataset, mixed_build: Path, tmp_path: Path) -> None:
    with ReferenceServer(dataset, "blind", family="spd-faith") as server:
        run_against(server, mixed_build, tmp_path, limit=1)
        changes: list[tuple[dict[str, Any], str]] = [({"layout": "side-by-side"}, "layout"),
                                                     ({"order": "random"}, "order"), ({"seed": 7}, "seed")]
        for change, field in changes:
            with pytest.raises(MmfaithError, match=f"run.json: field '{field}'"):
                run_against(server, mixed_build, tmp_path, limit=1, **change)
        with pytest.raises(MmfaithError, match="field 'model'"):
            run_spd_faith(RunRequest(dataset=mixed_build, model="oracle", base_urls=(server.base_url,), out=tmp_path,
                                     progress=False))
        # The same settings resume: one more pair is asked, the first is not asked again.
        seen = server.requests_seen
        summary = run_against(server, mixed_build, tmp_path, limit=2)
        assert (summary.answered, server.requests_seen - seen) == (8, 4)


# -- failures --------------------------------------------------------------------------------------

def test_500s_429s_timeouts_and_malformed_bodies_are_survived(mixed_build: Path, tmp_path: Path) -> None:
    script: dict[str, Iterable[Step]] = {"same": [("status", 500)],
                                         "different": [("status", 429, "1")],
                                         "count": [("sleep", 1.5), ("malformed",), ("status", 503)],
                                         "describe": [("status", 500)] * 10}
    with FlakyServer(script) as server:
        summary = flaky_run(server, mixed_build, tmp_path)
        different = server.times("different")
        count = server.times("count")
    assert (summary.answered, summary.failed, summary.requests) == (3, 1, 4)
    lines = prediction_lines(tmp_path)
    assert [e for line in lines for e in schema_errors("prediction", line)] == []
    by_probe = {line["probe"]: line for line in lines}
    assert by_probe["same"]["meta"]["attempts"] == 2
    assert by_probe["different"]["meta"]["attempts"] == 2
    assert different[1] - different[0] >= 0.95  # Retry-After: 1 was honored (our own backoff is 0.01 s)
    assert by_probe["count"]["meta"]["attempts"] == 4
    assert count[1] - count[0] < 1.0  # the sleeping attempt was abandoned after the 0.4 s timeout
    assert by_probe["count"]["meta"]["reasoning"] == "thinking apart"
    failed = by_probe["describe"]
    assert failed["response"] is None and failed["meta"]["attempts"] == 4
    assert failed["meta"]["error"].startswith("HTTP 500: scripted 500")
    assert failed["meta"]["count_asked"] == 2

    # The next run asks only the failed call; the answer then wins over the error line.
    with FlakyServer({}) as server:
        summary = flaky_run(server, mixed_build, tmp_path)
        assert [p for _, p, _ in server.seen] == ["describe"]
    assert (summary.answered, summary.failed) == (4, 0)
    describe = [line for line in prediction_lines(tmp_path) if line["probe"] == "describe"]
    assert [line["response"] is None for line in describe] == [True, False]


def test_a_failed_count_leaves_describe_unasked(mixed_build: Path, tmp_path: Path) -> None:
    with FlakyServer({"count": [("status", 502)] * 2}) as server:
        summary = flaky_run(server, mixed_build, tmp_path, max_attempts=2)
        assert Counter(p for _, p, _ in server.seen) == {"same": 1, "different": 1, "count": 2}
    by_probe = {line["probe"]: line for line in prediction_lines(tmp_path)}
    assert by_probe["count"]["meta"]["error"].startswith("HTTP 502")
    assert by_probe["describe"]["response"] is None and by_probe["describe"]["meta"]["error"].startswith("not asked")
    assert (summary.answered, summary.failed) == (2, 2)
    with FlakyServer({}) as server:
        assert flaky_run(server, mixed_build, tmp_path).answered == 4
        assert [p for _, p, _ in server.seen] == ["count", "describe"]
    assert answers(tmp_path)[(by_probe["count"]["id"], "describe")]["meta"]["count_asked"] == 2


def test_a_client_error_is_not_retried(mixed_build: Path, tmp_path: Path) -> None:
    with FlakyServer({"same": [("status", 400)]}) as server:
        summary = flaky_run(server, mixed_build, tmp_path)
    line = next(line for line in prediction_lines(tmp_path) if line["probe"] == "same")
    assert (line["meta"]["attempts"], summary.failed) == (1, 1)


# -- dry run, encodings, the key -------------------------------------------------------------------

def test_a_dry_run_sends_nothing(dataset: SpdDataset, mixed_build: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dry"
    with ReferenceServer(dataset, "oracle", family="spd-faith") as server:
        summary = run_against(server, mixed_build, out, dry_run=True, layout="side-by-side")
        assert server.requests_seen == 0
    printed = capsys.readouterr().out.splitlines()
    expected = len(read_records(mixed_build)) * len(PROBES)  # every pair's probes
    assert summary.requests == expected and len(printed) == expected + 1 and not out.exists()
    assert "nothing sent" in printed[-1] and "prompt tokens" in printed[-1]
    first = json.loads(printed[0])
    content = first["request"]["messages"][0]["content"]
    assert content[0]["image_url"]["url"].startswith("<image ") and "base64," not in printed[0]
    assert content[1]["text"] == prompt_text(first["probe"], "side-by-side")
    assert first["prompt_tokens_estimate"] > 0


def test_each_image_is_encoded_once_per_run(dataset: SpdDataset, mixed_build: Path, tmp_path: Path) -> None:
    distinct = {p.record[k] for p in dataset.pairs for k in ("image_a_sha256", "image_b_sha256")}
    assert len(distinct) < 2 * len(dataset.pairs)  # shared originals and controls: reuse is tested
    with ReferenceServer(dataset, "oracle", family="spd-faith") as server:
        separate = run_against(server, mixed_build, tmp_path / "separate")
        merged = run_against(server, mixed_build, tmp_path / "merged", layout="side-by-side", limit=4)
    assert separate.requests == len(read_records(mixed_build)) * len(PROBES)
    assert separate.images_encoded == len(distinct)
    assert merged.requests == 16 and merged.images_encoded == 4  # one canvas per pair, for its four probes
    assert separate.image_cpu_s > 0
    run = json.loads((tmp_path / "merged" / "run.json").read_text())
    assert run["image_sizes"] and all("x" in size for size in run["image_sizes"]) and run["gap_px"] == 16


def test_the_api_key_is_sent_but_never_written_or_printed(mixed_build: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMFAITH_TEST_KEY", SECRET)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FlakyServer({"same": [("status", 500)] * 10}) as server:
        flaky_run(server, mixed_build, tmp_path / "keyed", api_key_env="MMFAITH_TEST_KEY", progress=True)
        flaky_run(server, mixed_build, tmp_path / "local")
        keys = Counter(auth for _, _, auth in server.seen)
    assert keys == {f"Bearer {SECRET}": 7, "Bearer EMPTY": 7}
    captured = capsys.readouterr()
    written = "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    assert SECRET not in written + captured.out + captured.err
    assert json.loads((tmp_path / "keyed" / "run.json").read_text())["client"]["api_key_env"] == "MMFAITH_TEST_KEY"
    with pytest.raises(MmfaithError, match="MMFAITH_NO_SUCH_KEY"):
        flaky_run(server, mixed_build, tmp_path / "unset", api_key_env="MMFAITH_NO_SUCH_KEY")


def test_requests_spread_round_robin_over_replicas(dataset: SpdDataset, mixed_build: Path, tmp_path: Path) -> None:
    with ReferenceServer(dataset, "oracle", family="spd-faith") as one, ReferenceServer(dataset, "oracle", family="spd-faith") as two:
        summary = run_spd_faith(RunRequest(dataset=mixed_build, model="oracle", base_urls=(one.base_url, two.base_url),
                                           out=tmp_path, limit=4, progress=False))
        assert (one.requests_seen, two.requests_seen) == (8, 8)
    assert summary.answered == 16
    counts = [line["response"] for line in prediction_lines(tmp_path) if line["probe"] == "count"]
    assert len(counts) == 4 and all(read_count(text) is not None for text in counts)
