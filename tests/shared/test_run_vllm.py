"""`mmfaith run spd-faith` through a real vLLM server (CPU, tiny random Idefics3), then `mmfaith score`.

The model's answers are noise; what is real and checked: vLLM started by `--serve` and stopped
after, two images per request through the OpenAI protocol, the predictions' structure and token
counts, and scoring of what came back. Skips only where vLLM is not installed (tools/install-vllm.sh).
"""
from __future__ import annotations

import json
from pathlib import Path


from mmfaith.cli import main
from mmfaith.evaluators.vllm_serve import VllmEndpoint
from mmfaith.schema import schema_errors

from tests.conftest import TINY_MAX_MODEL_LEN

RUN_FLAGS = ["--limit", "3", "--max-tokens", "24", "--no-progress"]


def _predictions(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]


def _check_run(run_dir: Path, model: str) -> None:
    lines = _predictions(run_dir)
    assert {(p["probe"]) for p in lines} == {"same", "different", "count", "describe"}
    assert len({p["id"] for p in lines}) == 3
    for line in lines:
        assert schema_errors("prediction", line) == []
        assert line["model"] == model
        assert line["response"] is not None, line["meta"].get("error")
        assert line["meta"]["prompt_tokens"] > 8 and line["meta"]["completion_tokens"] >= 1
    run = json.loads((run_dir / "run.json").read_text())
    assert run["model"] == model


def test_run_with_serve_starts_vllm_and_scores(vllm_python: Path, tiny_vlm_dir: Path, mixed_build: Path,
                                              tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "run"
    code = main(["run", "spd-faith", "--dataset", str(mixed_build), "--serve", str(tiny_vlm_dir),
                 "--model", "tiny-idefics3", "--vllm-python", str(vllm_python),
                 "--serve-args", f"--max-model-len {TINY_MAX_MODEL_LEN} --max-num-seqs 3", "--out", str(run_dir),
                 *RUN_FLAGS])
    assert code == 0, capsys.readouterr().err
    _check_run(run_dir, "tiny-idefics3")
    log = (run_dir / "vllm.log").read_text()
    assert "Application startup complete" in log or "Uvicorn running" in log
    # vLLM's own account of its settings shows the pass-through options reached it
    assert "'max_num_seqs': 3" in log and f"'max_model_len': {TINY_MAX_MODEL_LEN}" in log
    serve = json.loads((run_dir / "run.json").read_text())["serve"]
    assert serve["args"] == ["--max-model-len", str(TINY_MAX_MODEL_LEN), "--max-num-seqs", "3"]
    assert serve["replicas"] == 1 and serve["model"] == str(tiny_vlm_dir)
    score_dir = tmp_path / "score"
    code = main(["score", "spd-faith", "--dataset", str(mixed_build), "--predictions",
                 str(run_dir / "predictions.jsonl"), "--from-run", "--out", str(score_dir), "--bootstrap", "50"])
    assert code == 0, capsys.readouterr().err
    metrics = json.loads((score_dir / "metrics.json").read_text())
    assert schema_errors("spd_faith_metrics", metrics) == []
    assert metrics["provenance"]["model"] == "tiny-idefics3"


def test_run_side_by_side_on_a_running_vllm(vllm_server: VllmEndpoint, mixed_build: Path, tmp_path: Path,
                                            capsys) -> None:
    run_dir = tmp_path / "run"
    code = main(["run", "spd-faith", "--dataset", str(mixed_build), "--model", vllm_server.model,
                 "--base-url", vllm_server.base_url, "--pair-layout", "side-by-side", "--order", "random",
                 "--out", str(run_dir), *RUN_FLAGS])
    assert code == 0, capsys.readouterr().err
    _check_run(run_dir, vllm_server.model)
    orders = {p["meta"]["order"] for p in _predictions(run_dir)}
    assert orders <= {"original-first", "edited-first"}
