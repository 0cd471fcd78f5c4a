"""MCoT through a real vLLM server (CPU, the tiny random Idefics3 of tests/tiny_vlm.py; the session's shared
server from conftest): the agent loop's request, and replays of multi-turn image conversations with
`continue_final_message` and with a final user turn. The model's answers are noise; the point is the
protocol: vLLM accepts every request and answers. Skips only where vLLM is not installed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.evaluators.vllm_serve import VllmEndpoint
from mmfaith.loaders.mcot.dataset import open_mcot_dataset
from mmfaith.schema import schema_errors
from tests.mcot_fixtures import write_vstar_folder

FLAGS = ["--max-tokens", "16", "--no-progress", "--limit", "2"]


def _lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def oracle_traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a V* build of 2 items, the zoom-oracle's predictions on it: one crop per trace)."""
    root = tmp_path_factory.mktemp("mcot-vllm")
    build = root / "build"
    assert main(["build", "mcot", "--source", "vstar", "--source-path", str(write_vstar_folder(root / "src", 2)),
                 "--out", str(build)]) == 0
    with ReferenceServer(open_mcot_dataset(build), "zoom-oracle", family="mcot") as server:
        assert main(["run", "mcot", "--dataset", str(build), "--model", "zoom-oracle", "--base-url", server.base_url,
                     "--out", str(root / "oracle"), "--no-progress"]) == 0
    return build, root / "oracle" / "predictions.jsonl"


@pytest.mark.parametrize("continuation", ["continue", "user-turn"])
def test_vllm_replays_multi_turn_image_conversations(vllm_server: VllmEndpoint, oracle_traces: tuple[Path, Path],
                                                     tmp_path: Path, continuation: str) -> None:
    build, traces = oracle_traces
    run_dir = tmp_path / "run"
    assert main(["run", "mcot", "--dataset", str(build), "--model", vllm_server.model, "--base-url",
                 vllm_server.base_url, "--out", str(run_dir), "--traces", str(traces), "--continuation", continuation,
                 *FLAGS]) == 0
    lines = _lines(run_dir)
    assert sorted((line["id"], line["probe"]) for line in lines) == sorted(
        (f"vstar-{n}", probe) for n in range(2) for probe in ("trace", "replay_none", "replay_text", "replay_visual"))
    for line in lines:
        assert schema_errors("prediction", line) == []
        assert line["model"] == vllm_server.model and line["response"] is not None, line["meta"].get("error")
        if line["probe"] == "trace":
            assert line["meta"]["submitted_by"] == "zoom-oracle" and len(line["meta"]["trace"]["crops"]) == 1
            continue
        # the replay showed the image and the (real or noise) crop, and vLLM answered
        assert len(line["meta"]["images"]) == 2 and line["meta"]["continuation"] == continuation
        assert line["meta"]["completion_tokens"] >= 1 and line["meta"]["prompt_tokens"] > 20
    assert json.loads((run_dir / "run.json").read_text())["continuation"] == continuation


def test_vllm_runs_the_agent_loop(vllm_server: VllmEndpoint, oracle_traces: tuple[Path, Path], tmp_path: Path) -> None:
    build, _ = oracle_traces
    run_dir = tmp_path / "run"
    code = main(["run", "mcot", "--dataset", str(build), "--model", vllm_server.model, "--base-url",
                 vllm_server.base_url, "--out", str(run_dir), "--max-turns", "1", *FLAGS])
    assert code == 0
    traces = [line for line in _lines(run_dir) if line["probe"] == "trace"]
    assert len(traces) == 2
    for line in traces:
        trace = line["meta"]["trace"]
        assert line["response"] is not None and trace["version"] == "mcot-trace/1"
        assert len(trace["turns"]) == 1 and trace["stopped"] in ("answer", "no_answer", "max_turns")


def test_run_serve_gives_vllm_an_image_per_turn(vllm_python: Path, tiny_vlm_dir: Path,
                                                oracle_traces: tuple[Path, Path], tmp_path: Path) -> None:
    """`run mcot --serve` starts vLLM with --limit-mm-per-prompt of max_turns + 1 images (here 3 + 1)."""
    from tests.conftest import TINY_MAX_MODEL_LEN

    build, traces = oracle_traces
    run_dir = tmp_path / "run"
    assert main(["run", "mcot", "--dataset", str(build), "--serve", str(tiny_vlm_dir), "--model", "tiny-idefics3",
                 "--vllm-python", str(vllm_python), "--serve-max-model-len", str(TINY_MAX_MODEL_LEN),
                 "--out", str(run_dir), "--traces", str(traces), "--max-turns", "3", *FLAGS]) == 0
    log = (run_dir / "vllm.log").read_text()
    assert "--limit-mm-per-prompt" in log or "limit_mm_per_prompt" in log
    assert '{"image": 4}' in log or "'image': 4" in log
    assert all(line["response"] is not None for line in _lines(run_dir))
