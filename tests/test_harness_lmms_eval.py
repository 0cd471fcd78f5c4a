"""The lmms-eval round trip with the real harness: export, `python -m lmms_eval` (its `openai` model)
against mmfaith's reference server over HTTP, import, score; compared with `mmfaith run` against
the same server. lmms-eval 0.7.3 runs in its own environment (tools/install-lmms-eval.sh)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.evaluators.spd_faith.prompts import TEMPLATES_SHA256
from mmfaith.loaders.spd_faith import open_spd_dataset

from .harness_round_trip import (assert_describe_used_own_count, assert_same_as_run, harness_env, harness_python,
                                 lines_by_key, reference_run, subset_build)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def lmms_python() -> Path:
    return harness_python("MMFAITH_LMMS_EVAL_PYTHON", ".venv-lmms-eval", "tools/install-lmms-eval.sh")


def run_lmms_eval(python: Path, tasks: Path, model: str, base_url: str, out: Path) -> None:
    command = [str(python), "-m", "lmms_eval", "--model", "openai", "--model_args",
               f"model_version={model},base_url={base_url},max_retries=1,retry_backoff_s=0",
               "--include_path", str(tasks), "--tasks", "mmfaith_spd_faith", "--batch_size", "1",
               "--log_samples", "--output_path", str(out)]
    out.mkdir(parents=True)
    done = subprocess.run(command, env=harness_env(OPENAI_API_KEY="EMPTY"), cwd=out, capture_output=True,
                          text=True, timeout=600)
    # lmms-eval 0.7.3 exits 0 after an error during evaluation: its samples files are the evidence
    assert done.returncode == 0 and list(out.rglob("*_samples_mmfaith_*.jsonl")), done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.parametrize("model", ["oracle", "pixel-diff", "blind"])
def test_lmms_eval_round_trip_scores_as_mmfaith_run(model: str, lmms_python: Path, mixed_build: Path,
                                                    tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    assert main(["export", "lmms-eval", str(mixed_build), "--out", str(tasks), "--no-progress"]) == 0
    config = (tasks / "mmfaith_spd_faith_count_describe.yaml").read_text()
    assert "output_type: generate_until_agentic" in config and '"until": []' in config
    assert "reasoning_tags: none" in config and TEMPLATES_SHA256 in config
    assert f'"test": "{tasks / "data"}' in config  # absolute data_files

    dataset = open_spd_dataset(mixed_build)
    with ReferenceServer(dataset, model) as server:
        run_lines = reference_run(mixed_build, model, server.base_url, tmp_path / "reference")
        seen_by_run = server.requests_seen
        run_lmms_eval(lmms_python, tasks, model, server.base_url, tmp_path / "logs")
        # lmms-eval sent exactly the requests `mmfaith run` did: one per (pair, probe)
        assert server.requests_seen - seen_by_run == seen_by_run == 4 * len(dataset.pairs)

    imported = tmp_path / "imported" / "predictions.jsonl"
    assert main(["import", "lmms-eval", str(tmp_path / "logs"), "--dataset", str(mixed_build), "--out", str(imported),
                 "--export", str(tasks)]) == 0
    lines = assert_same_as_run(imported, run_lines, mixed_build, tmp_path / "reference" / "score", tmp_path / "score")
    assert_describe_used_own_count(lines)
    if model == "blind":  # it counts 0 everywhere: describe was asked with its count, not the gold one
        gold = {pair.id: len(pair.record["differences"]) for pair in dataset.pairs}
        assert all(line["meta"]["count_asked"] == 0 for (_, probe), line in lines.items() if probe == "describe")
        assert any(count > 0 for count in gold.values())
    provenance = json.loads((imported.parent / "import.json").read_text())
    assert provenance["harness"] == "lmms-eval" and provenance["model"] == model
    assert provenance["prompt_templates_sha256"] == TEMPLATES_SHA256
    assert provenance["export"]["prompt_templates_sha256"] == TEMPLATES_SHA256
    assert provenance["counts"] == {"lines": len(run_lines), "answered": len(run_lines), "errors": 0, "missing": 0}
    assert "finish_reason" in provenance["unknown_fields"] and "latency_s" in provenance["unknown_fields"]
    same = next(line for (_, probe), line in lines.items() if probe == "same")
    assert same["meta"]["prompt_tokens"] > 0 and same["meta"]["finish_reason"] is None


def test_lmms_eval_failed_calls_import_as_error_lines(lmms_python: Path, mixed_build: Path, tmp_path: Path) -> None:
    """A server that knows only the first 3 pairs answers HTTP 400 for the others: lmms-eval logs its
    failure text, which imports as error lines (describe not asked after a failed count), never answers."""
    tasks = tmp_path / "tasks"
    assert main(["export", "lmms-eval", str(mixed_build), "--out", str(tasks), "--no-progress"]) == 0
    known = open_spd_dataset(subset_build(mixed_build, 3, tmp_path / "known"))
    with ReferenceServer(known, "oracle") as server:
        run_lmms_eval(lmms_python, tasks, "oracle", server.base_url, tmp_path / "logs")
    imported = tmp_path / "imported" / "predictions.jsonl"
    assert main(["import", "lmms-eval", str(tmp_path / "logs"), "--dataset", str(mixed_build),
                 "--out", str(imported)]) == 0
    lines = lines_by_key(imported)
    known_ids = {pair.id for pair in known.pairs}
    for (item_id, probe), line in lines.items():
        if item_id in known_ids:
            assert line["response"] is not None and line["meta"]["error"] is None
        elif probe == "describe":
            assert line["response"] is None and line["meta"]["error"].startswith("not asked: this pair's count")
        else:
            assert line["response"] is None and "[LMMS_EVAL_REQUEST_FAILED" in line["meta"]["error"]
            assert "400" in line["meta"]["error"]
    score = tmp_path / "score"
    assert main(["score", "spd-faith", "--dataset", str(mixed_build), "--predictions", str(imported),
                 "--out", str(score)]) == 0
    counts = json.loads((score / "metrics.json").read_text())["counts"]
    assert counts["n_errors"] == 4 * (len(lines) // 4 - 3) and counts["n_answered"] == 4 * 3
