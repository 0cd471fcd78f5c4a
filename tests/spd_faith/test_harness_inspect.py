"""The inspect_ai round trip with the real harness: export, `inspect eval` (its openai-api provider)
against mmfaith's reference server over HTTP, `mmfaith import inspect` (run where inspect-ai is
installed: it reads the .eval logs with inspect_ai.log.read_eval_log), score; compared with
`mmfaith run` against the same server. inspect-ai 0.3.285 runs in its own environment
(tools/install-inspect.sh, which installs this checkout of mmfaith beside it)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mmfaith.evaluators.spd_faith.prompts import TEMPLATES_SHA256

from tests.harness_round_trip import failed_calls, harness_env, harness_python, round_trip

pytestmark = pytest.mark.e2e  # long: the test command runs it first (tests/conftest.py)


@pytest.fixture(scope="module")
def inspect_python() -> Path:
    return harness_python("MMFAITH_INSPECT_PYTHON", ".venv-inspect", "tools/install-inspect.sh")


def inspect_runner(python: Path):
    def run(tasks: Path, model: str, base_url: str, logs: Path) -> None:
        # inspect 0.3.285 on Python 3.11 takes the task file by a relative path: run it from the export folder
        command = [str(python), "-m", "inspect_ai", "eval", "mmfaith_spd_faith.py", "--model",
                   f"openai-api/mmf/{model}", "--log-dir", str(logs), "--display", "plain", "--max-retries", "1",
                   "--no-fail-on-error"]
        done = subprocess.run(command, env=harness_env(MMF_BASE_URL=base_url, MMF_API_KEY="EMPTY"), cwd=tasks,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0 and list(logs.glob("*.eval")), done.stdout[-3000:] + done.stderr[-3000:]

    return run


def inspect_importer(python: Path):
    def run(logs: Path, dataset: Path, out: Path) -> None:
        command = [str(python), "-m", "mmfaith", "import", "inspect", str(logs), "--dataset", str(dataset),
                   "--out", str(out), "--export", str(logs.parent / "tasks")]
        done = subprocess.run(command, env=harness_env(), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    return run


@pytest.mark.parametrize("model", ["oracle", "pixel-diff", "blind"])
def test_inspect_round_trip_scores_as_mmfaith_run(model: str, inspect_python: Path, mixed_build: Path,
                                                  tmp_path: Path) -> None:
    lines, run_lines, provenance = round_trip("inspect", model, mixed_build, tmp_path, inspect_runner(inspect_python),
                                              inspect_importer(inspect_python))
    task_file = (tmp_path / "tasks" / "mmfaith_spd_faith.py").read_text()
    assert "def mmfaith_spd_faith(" in task_file and TEMPLATES_SHA256 in task_file
    for key, line in lines.items():  # inspect logs the stop reason and usage of every round, dependent ones too
        assert line["meta"]["finish_reason"] == "stop", key
        assert line["meta"]["prompt_tokens"] == run_lines[key]["meta"]["prompt_tokens"], key
        assert line["meta"]["completion_tokens"] == run_lines[key]["meta"]["completion_tokens"], key
    assert provenance["harness_version"] == "0.3.285"


def test_inspect_failed_calls_import_as_error_lines(inspect_python: Path, mixed_build: Path, tmp_path: Path) -> None:
    """HTTP 400 for the pairs the server does not know: inspect records sample errors, which import as
    error lines, never as answers."""
    failed = failed_calls("inspect", mixed_build, tmp_path, inspect_runner(inspect_python),
                          inspect_importer(inspect_python))
    assert failed and all(line["meta"]["error"].startswith(
        'inspect sample error: BadRequestError("Error code: 400 - the images are not a pair')
        for line in failed.values())


def test_a_folder_exported_again_from_another_dataset_is_read_afresh(inspect_python: Path, mixed_build: Path,
                                                                     builds_by_type: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    """inspect keys its dataset cache by path and arguments: the task reads its rows uncached, so a
    re-export into the same folder is what the next run asks (inspect's own mockllm model answers)."""
    from mmfaith.cli import main
    from mmfaith.loaders.spd_faith import open_spd_dataset

    from tests.harness_round_trip import lines_by_key

    tasks = tmp_path / "tasks"
    for number, build in enumerate((mixed_build, builds_by_type["color"])):
        assert main(["export", "inspect", str(build), "--out", str(tasks), "--no-progress"]) == 0
        logs = tmp_path / f"logs{number}"
        done = subprocess.run([str(inspect_python), "-m", "inspect_ai", "eval", "mmfaith_spd_faith.py", "--model",
                               "mockllm/model", "--log-dir", str(logs), "--display", "plain"], env=harness_env(),
                              cwd=tasks, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        imported = tmp_path / f"imported{number}" / "predictions.jsonl"
        inspect_importer(inspect_python)(logs, build, imported)  # refuses ids of another dataset
        assert {item_id for item_id, _ in lines_by_key(imported)} == {pair.id for pair in open_spd_dataset(build).pairs}
