"""The lmms-eval round trip with the real harness: export, `python -m lmms_eval` (its `openai` model)
against mmfaith's reference server over HTTP, import, score; compared with `mmfaith run` against
the same server. lmms-eval 0.7.3 runs in its own environment (tools/install-lmms-eval.sh)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.spd_faith.prompts import TEMPLATES_SHA256

from tests.harness_round_trip import failed_calls, harness_env, harness_python, round_trip

pytestmark = pytest.mark.e2e  # long: the test command runs it first (tests/conftest.py)


@pytest.fixture(scope="module")
def lmms_python() -> Path:
    return harness_python("MMFAITH_LMMS_EVAL_PYTHON", ".venv-lmms-eval", "tools/install-lmms-eval.sh")


def lmms_eval_runner(python: Path):
    def run(tasks: Path, model: str, base_url: str, out: Path) -> None:
        command = [str(python), "-m", "lmms_eval", "--model", "openai", "--model_args",
                   f"model_version={model},base_url={base_url},max_retries=1,retry_backoff_s=0",
                   "--include_path", str(tasks), "--tasks", "mmfaith_spd_faith", "--batch_size", "1",
                   "--log_samples", "--output_path", str(out)]
        out.mkdir(parents=True)
        done = subprocess.run(command, env=harness_env(OPENAI_API_KEY="EMPTY"), cwd=out, capture_output=True,
                              text=True, timeout=600)
        # lmms-eval 0.7.3 exits 0 after an error during evaluation: its samples files are the evidence
        assert done.returncode == 0 and list(out.rglob("*_samples_mmfaith_*.jsonl")), \
            done.stdout[-3000:] + done.stderr[-3000:]

    return run


def import_lmms_eval(logs: Path, dataset: Path, out: Path) -> None:
    assert main(["import", "lmms-eval", str(logs), "--dataset", str(dataset), "--out", str(out),
                 "--export", str(logs.parent / "tasks")]) == 0


@pytest.mark.parametrize("model", ["oracle", "pixel-diff", "blind"])
def test_lmms_eval_round_trip_scores_as_mmfaith_run(model: str, lmms_python: Path, mixed_build: Path,
                                                    tmp_path: Path) -> None:
    lines, _, provenance = round_trip("lmms-eval", model, mixed_build, tmp_path, lmms_eval_runner(lmms_python),
                                      import_lmms_eval)
    config = (tmp_path / "tasks" / "mmfaith_spd_faith_count_describe.yaml").read_text()
    assert "output_type: generate_until_agentic" in config and '"until": []' in config
    assert "reasoning_tags: none" in config and TEMPLATES_SHA256 in config
    assert f'"test": "{tmp_path / "tasks" / "data"}' in config  # absolute data_files
    assert provenance["prompt_templates_sha256"] == provenance["export"]["prompt_templates_sha256"] == TEMPLATES_SHA256
    assert "finish_reason" in provenance["unknown_fields"] and "latency_s" in provenance["unknown_fields"]
    (run,) = provenance["lmms_eval_runs"]
    assert run["model"] == "openai" and f"model_version={model}" in run["model_args"]
    assert set(run["task_hashes"]) >= {"mmfaith_spd_faith_same", "mmfaith_spd_faith_count_describe"}
    same = next(line for (_, probe), line in lines.items() if probe == "same")
    assert same["meta"]["prompt_tokens"] > 0 and same["meta"]["finish_reason"] is None


def test_lmms_eval_failed_calls_import_as_error_lines(lmms_python: Path, mixed_build: Path, tmp_path: Path) -> None:
    """HTTP 400 for the pairs the server does not know: lmms-eval logs its failure text, which imports as
    error lines, never as answers."""
    failed = failed_calls("lmms-eval", mixed_build, tmp_path, lmms_eval_runner(lmms_python), import_lmms_eval)
    assert failed and all(line["meta"]["error"].startswith("[LMMS_EVAL_REQUEST_FAILED after 1 retries]")
                          and "400" in line["meta"]["error"] for line in failed.values())


def test_a_folder_exported_again_from_another_dataset_is_read_afresh(lmms_python: Path, mixed_build: Path,
                                                                     builds_by_type: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    """Re-exporting into the same folder: lmms-eval's next run asks the new rows (the `datasets` cache it
    reads parquet through notices rewritten files, unlike inspect's own cache)."""
    from mmfaith.evaluators.reference_server import ReferenceServer
    from mmfaith.loaders.spd_faith import open_spd_dataset

    from tests.harness_round_trip import lines_by_key

    tasks = tmp_path / "tasks"
    for number, build in enumerate((mixed_build, builds_by_type["color"])):
        assert main(["export", "lmms-eval", str(build), "--out", str(tasks), "--no-progress"]) == 0
        dataset = open_spd_dataset(build)
        logs, imported = tmp_path / f"logs{number}", tmp_path / f"imported{number}" / "predictions.jsonl"
        with ReferenceServer(dataset, "oracle", family="spd-faith") as server:
            lmms_eval_runner(lmms_python)(tasks, "oracle", server.base_url, logs)
        assert main(["import", "lmms-eval", str(logs), "--dataset", str(build), "--out", str(imported)]) == 0
        lines = lines_by_key(imported)
        assert {item_id for item_id, _ in lines} == {pair.id for pair in dataset.pairs}
        assert all(line["response"] is not None for line in lines.values())
