"""The inspect_ai round trip with the real harness: export, `inspect eval` (its openai-api provider)
against mmfaith's reference server over HTTP, `mmfaith import inspect` (run where inspect-ai is
installed: it reads the .eval logs with inspect_ai.log.read_eval_log), score; compared with
`mmfaith run` against the same server. inspect-ai 0.3.285 runs in its own environment
(tools/install-inspect.sh, which installs this checkout of mmfaith beside it)."""
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


@pytest.fixture(scope="module")
def inspect_python() -> Path:
    return harness_python("MMFAITH_INSPECT_PYTHON", ".venv-inspect", "tools/install-inspect.sh")


def run_inspect(python: Path, tasks: Path, model: str, base_url: str, logs: Path) -> None:
    # inspect 0.3.285 on Python 3.11 takes the task file by a relative path: run it from the export folder
    command = [str(python), "-m", "inspect_ai", "eval", "mmfaith_spd_faith.py", "--model", f"openai-api/mmf/{model}",
               "--log-dir", str(logs), "--display", "plain", "--max-retries", "1", "--no-fail-on-error"]
    done = subprocess.run(command, env=harness_env(MMF_BASE_URL=base_url, MMF_API_KEY="EMPTY"), cwd=tasks,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and list(logs.glob("*.eval")), done.stdout[-3000:] + done.stderr[-3000:]


def import_inspect(python: Path, logs: Path, dataset: Path, out: Path, *extra: str) -> None:
    command = [str(python), "-m", "mmfaith", "import", "inspect", str(logs), "--dataset", str(dataset),
               "--out", str(out), *extra]
    done = subprocess.run(command, env=harness_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.parametrize("model", ["oracle", "pixel-diff", "blind"])
def test_inspect_round_trip_scores_as_mmfaith_run(model: str, inspect_python: Path, mixed_build: Path,
                                                  tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    assert main(["export", "inspect", str(mixed_build), "--out", str(tasks), "--no-progress"]) == 0
    task_file = (tasks / "mmfaith_spd_faith.py").read_text()
    assert "def mmfaith_spd_faith(" in task_file and TEMPLATES_SHA256 in task_file
    dataset = open_spd_dataset(mixed_build)
    with ReferenceServer(dataset, model) as server:
        run_lines = reference_run(mixed_build, model, server.base_url, tmp_path / "reference")
        seen_by_run = server.requests_seen
        run_inspect(inspect_python, tasks, model, server.base_url, tmp_path / "logs")
        # inspect sent exactly the requests `mmfaith run` did: one per (pair, probe)
        assert server.requests_seen - seen_by_run == seen_by_run == 4 * len(dataset.pairs)
    imported = tmp_path / "imported" / "predictions.jsonl"
    import_inspect(inspect_python, tmp_path / "logs", mixed_build, imported, "--export", str(tasks))
    lines = assert_same_as_run(imported, run_lines, mixed_build, tmp_path / "reference" / "score", tmp_path / "score")
    assert_describe_used_own_count(lines)
    if model == "blind":  # it counts 0 everywhere: describe was asked with its count, not the gold one
        assert all(line["meta"]["count_asked"] == 0 for (_, probe), line in lines.items() if probe == "describe")
    for key, line in lines.items():  # inspect logs the stop reason and usage of every round, dependent ones too
        assert line["meta"]["finish_reason"] == "stop", key
        assert line["meta"]["prompt_tokens"] == run_lines[key]["meta"]["prompt_tokens"], key
        assert line["meta"]["completion_tokens"] == run_lines[key]["meta"]["completion_tokens"], key
    provenance = json.loads((imported.parent / "import.json").read_text())
    assert provenance["harness"] == "inspect" and provenance["harness_version"] == "0.3.285"
    assert provenance["model"] == model and provenance["export"]["harness"] == "inspect"
    assert provenance["counts"] == {"lines": len(run_lines), "answered": len(run_lines), "errors": 0, "missing": 0}


def test_inspect_failed_calls_import_as_error_lines(inspect_python: Path, mixed_build: Path, tmp_path: Path) -> None:
    """A server that knows only the first 3 pairs answers HTTP 400 for the others: inspect records sample
    errors, which import as error lines (describe not asked after a failed count), never as answers."""
    tasks = tmp_path / "tasks"
    assert main(["export", "inspect", str(mixed_build), "--out", str(tasks), "--no-progress"]) == 0
    known = open_spd_dataset(subset_build(mixed_build, 3, tmp_path / "known"))
    with ReferenceServer(known, "oracle") as server:
        run_inspect(inspect_python, tasks, "oracle", server.base_url, tmp_path / "logs")
    imported = tmp_path / "imported" / "predictions.jsonl"
    import_inspect(inspect_python, tmp_path / "logs", mixed_build, imported)
    lines = lines_by_key(imported)
    known_ids = {pair.id for pair in known.pairs}
    assert len(lines) == 4 * len(open_spd_dataset(mixed_build).pairs)
    for (item_id, probe), line in lines.items():
        if item_id in known_ids:
            assert line["response"] is not None and line["meta"]["error"] is None
        elif probe == "describe":
            assert line["response"] is None and line["meta"]["error"].startswith("not asked: this pair's count")
        else:
            assert line["response"] is None
            assert line["meta"]["error"].startswith('inspect sample error: BadRequestError("Error code: 400 - the images')
    score = tmp_path / "score"
    assert main(["score", "spd-faith", "--dataset", str(mixed_build), "--predictions", str(imported),
                 "--out", str(score)]) == 0
    counts = json.loads((score / "metrics.json").read_text())["counts"]
    assert counts["n_answered"] == 4 * 3 and counts["n_errors"] == len(lines) - 4 * 3
