"""A real vLLM server (CPU) serving a tiny random Idefics3: two-image requests, the image limit, stopping.

Needs the vLLM venv from tools/install-vllm.sh (``<repo>/.venv-vllm``, or the python named by
$MMFAITH_VLLM_PYTHON); without it the server tests skip, saying so. The model's answers are
noise: tests assert the protocol's structure, never the text.

The fixtures `vllm_python`, `tiny_vlm_dir` and `vllm_server` (one server for the whole session)
live in tests/conftest.py, shared with the run-loop tests.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from mmfaith.errors import MmfaithError
from mmfaith.evaluators.spd_faith.prompts import LAYOUTS, PROBES, prompt_text
from mmfaith.evaluators.vllm_serve import VllmEndpoint, VllmServer, gpu_sets, serve_vllm

from tests.conftest import TINY_MAX_MODEL_LEN

@pytest.fixture(scope="session")
def pair_png_urls(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """image_a and image_b of a real SPD-Faith pair (built by the CLI), as PNG data URLs, bytes as stored."""
    out = tmp_path_factory.mktemp("spd-pair")
    subprocess.run([sys.executable, "-m", "mmfaith", "build", "spd-faith", "--out", str(out), "--per-tier", "1",
                    "--no-progress"], check=True, capture_output=True, text=True, timeout=300)
    record = json.loads((out / "records.jsonl").read_text().splitlines()[0])
    pngs = [(out / record[key]).read_bytes() for key in ("image_a", "image_b")]
    assert all(png.startswith(b"\x89PNG") for png in pngs)
    return ["data:image/png;base64," + base64.b64encode(png).decode("ascii") for png in pngs]


def _messages(image_urls: list[str], text: str) -> list[dict[str, object]]:
    content: list[dict[str, object]] = [{"type": "image_url", "image_url": {"url": url}} for url in image_urls]
    content.append({"type": "text", "text": text})
    return [{"role": "user", "content": content}]


# Cheap tests first: they run before the session server starts and do not compete with it.

def test_missing_vllm_in_the_given_python_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MmfaithError, match="vllm is not importable by .*tools/install-vllm.sh or pass --vllm-python"):
        with serve_vllm(tmp_path, python=sys.executable):  # the project's venv has no vllm
            pass
    with pytest.raises(MmfaithError, match="does not exist: install it with tools/install-vllm.sh"):
        with serve_vllm(tmp_path, python=tmp_path / "no-such-python"):
            pass


def test_replicas_get_disjoint_gpu_sets() -> None:
    assert gpu_sets(["0", "1", "2", "3"], 2) == [["0", "1"], ["2", "3"]]
    assert gpu_sets(["4", "5", "6", "7", "8"], 2) == [["4", "5"], ["6", "7"]]  # the fifth GPU stays unused
    assert gpu_sets([], 3) is None  # no GPU: CPU servers, nothing to split
    with pytest.raises(MmfaithError, match="--replicas 3 needs at least 3 GPUs; 2 visible"):
        gpu_sets(["0", "1"], 3)


def test_a_missing_model_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MmfaithError, match="model folder .*no-such-model does not exist"):
        with serve_vllm(tmp_path / "no-such-model", python=sys.executable):
            pass


def test_a_server_that_dies_at_startup_names_its_log(vllm_python: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    model = tmp_path / "not-a-model"  # a folder without config.json
    model.mkdir()
    server = VllmServer(model, python=vllm_python, log_path=log, startup_timeout_s=300)
    with pytest.raises(MmfaithError, match="exited with code") as caught:
        server.start()
    assert str(log) in str(caught.value) and "not-a-model" in str(caught.value)
    assert server.process is not None and server.process.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(server.process.pid, 0)


def test_a_startup_timeout_stops_the_group(vllm_python: Path, tmp_path: Path) -> None:
    (tmp_path / "never-ready").mkdir()
    server = VllmServer(tmp_path / "never-ready", python=vllm_python, startup_timeout_s=2,
                        log_path=tmp_path / "server.log")
    with pytest.raises(MmfaithError, match="did not answer a chat completion within 2 s|exited with code"):
        with server:
            pass
    assert server.process is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(server.process.pid, 0)


def test_the_process_group_is_gone_after_the_block_exits_by_an_exception(vllm_python: Path, tiny_vlm_dir: Path,
                                                                          tmp_path: Path) -> None:
    """A server of its own (before the session's starts): ready, answering, then an exception in the block."""
    with pytest.raises(RuntimeError, match="leaving the block"):
        with serve_vllm(tiny_vlm_dir, python=vllm_python, max_model_len=TINY_MAX_MODEL_LEN, limit_images=2,
                        startup_timeout_s=600, log_path=tmp_path / "server.log") as endpoint:
            os.killpg(endpoint.pgid, 0)  # running
            assert endpoint.model == str(tiny_vlm_dir)  # vLLM's default served name: the model as given
            client = openai.OpenAI(base_url=endpoint.base_url, api_key="EMPTY", max_retries=0, timeout=120)
            assert [m.id for m in client.models.list().data] == [str(tiny_vlm_dir)]
            raise RuntimeError("leaving the block")
    with pytest.raises(ProcessLookupError):
        os.killpg(endpoint.pgid, 0)


# The session server.

def test_two_image_request_returns_a_completion(vllm_server: VllmEndpoint, pair_png_urls: list[str]) -> None:
    client = openai.OpenAI(base_url=vllm_server.base_url, api_key="EMPTY", max_retries=0, timeout=120)
    text = prompt_text("describe", "separate", 3)
    response = client.chat.completions.create(model=vllm_server.model, messages=_messages(pair_png_urls, text),
                                              max_tokens=16, temperature=0.0)
    assert response.model == "tiny-idefics3"
    assert len(response.choices) == 1
    choice = response.choices[0]
    assert choice.finish_reason in ("stop", "length")
    assert isinstance(choice.message.content, str) and choice.message.role == "assistant"
    assert response.usage is not None
    assert 0 < response.usage.completion_tokens <= 16
    # The probe, two images (4 tokens each plus their markers) and the turn format, in the window.
    assert 2 * 4 < response.usage.prompt_tokens < TINY_MAX_MODEL_LEN
    assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens


def test_every_probe_fits_with_the_default_answer_budget(vllm_server: VllmEndpoint, pair_png_urls: list[str]) -> None:
    """vLLM refuses (HTTP 400) a request whose prompt plus max_tokens exceeds --max-model-len."""
    from concurrent.futures import ThreadPoolExecutor

    client = openai.OpenAI(base_url=vllm_server.base_url, api_key="EMPTY", max_retries=0, timeout=120)

    def ask(layout_probe: tuple[str, str]) -> int:
        layout, probe = layout_probe
        images = pair_png_urls if layout == "separate" else pair_png_urls[:1]
        response = client.chat.completions.create(
            model=vllm_server.model, messages=_messages(images, prompt_text(probe, layout, 2)),
            max_tokens=1024, temperature=0.0)  # mmfaith.clients' default answer budget
        assert response.choices[0].finish_reason in ("stop", "length")
        assert response.usage is not None
        return response.usage.prompt_tokens

    cases = [(layout, probe) for layout in LAYOUTS for probe in PROBES]
    with ThreadPoolExecutor(len(cases)) as pool:  # batched by the server: one decode loop for all
        prompt_tokens = list(pool.map(ask, cases))
    assert max(prompt_tokens) < 400, dict(zip(cases, prompt_tokens))


def test_a_third_image_is_a_clean_http_400(vllm_server: VllmEndpoint, pair_png_urls: list[str]) -> None:
    client = openai.OpenAI(base_url=vllm_server.base_url, api_key="EMPTY", max_retries=0, timeout=120)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=vllm_server.model, max_tokens=4,
                                       messages=_messages([*pair_png_urls, pair_png_urls[0]], "Describe."))
    assert caught.value.status_code == 400
    assert "image" in str(caught.value).lower()
    # The server is still serving after refusing.
    response = client.chat.completions.create(model=vllm_server.model, messages=_messages(pair_png_urls, "Say ok."),
                                              max_tokens=2)
    assert response.choices


def test_concurrent_requests_are_all_answered(vllm_server: VllmEndpoint, pair_png_urls: list[str]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    client = openai.OpenAI(base_url=vllm_server.base_url, api_key="EMPTY", max_retries=0, timeout=120)

    def ask(i: int) -> int:
        response = client.chat.completions.create(
            model=vllm_server.model, messages=_messages(pair_png_urls, prompt_text("count", "separate")),
            max_tokens=8, temperature=0.0)
        return response.usage.completion_tokens if response.usage else 0

    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        assert all(n > 0 for n in pool.map(ask, range(16)))
    assert time.monotonic() - started < 120


