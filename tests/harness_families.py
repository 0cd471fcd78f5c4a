"""The harness round trip for any family with a harness part (VFaith, CRM; SPD-Faith's own checks are
tests/harness_round_trip.py): export, run the real harness in its own environment against mmfaith's
reference server over HTTP, import its logs, score; compared line by line and score by score with
`mmfaith run FAMILY` then `mmfaith score FAMILY --from-run` against the same server.

The harness environments are found as tests/harness_round_trip.py says ($MMFAITH_LMMS_EVAL_PYTHON,
$MMFAITH_INSPECT_PYTHON, or <repo>/.venv-lmms-eval, <repo>/.venv-inspect); the tests skip when absent.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from mmfaith import families
from mmfaith.cli import main
from mmfaith.evaluators.harness.runtime import harness_part
from mmfaith.evaluators.harness.spec import family_task
from mmfaith.evaluators.reference_server import ReferenceServer

from .harness_round_trip import harness_env, lines_by_key, scores_without_provenance


RUN_ONLY_META = ("attempts", "latency_s", "prompt_tokens", "completion_tokens", "finish_reason", "reasoning",
                 "generation", "shown_sha256")
"""Meta that `mmfaith run`'s engine writes and a harness log tells differently or not at all (the rest of a
run line's meta, the family's own and the images shown, must be imported as the run wrote it): `generation` is
the run's own settings and request seed (a harness sends its own, and no seed), `shown_sha256` the run's stamp
of what the item showed (an imported line is checked by its images only)."""


def run_lmms_eval(python: Path, task: str, tasks: Path, model: str, base_url: str, out: Path) -> None:
    """`python -m lmms_eval` (its `openai` model) over the export's group task against the server."""
    command = [str(python), "-m", "lmms_eval", "--model", "openai", "--model_args",
               f"model_version={model},base_url={base_url},max_retries=1,retry_backoff_s=0",
               "--include_path", str(tasks), "--tasks", task, "--batch_size", "1",
               "--log_samples", "--output_path", str(out)]
    out.mkdir(parents=True)
    done = subprocess.run(command, env=harness_env(OPENAI_API_KEY="EMPTY"), cwd=out, capture_output=True,
                          text=True, timeout=900)
    # lmms-eval 0.7.3 exits 0 after an error during evaluation: its samples files are the evidence
    assert done.returncode == 0 and list(out.rglob("*_samples_mmfaith_*.jsonl")), \
        done.stdout[-3000:] + done.stderr[-3000:]


def run_inspect(python: Path, task: str, tasks: Path, model: str, base_url: str, logs: Path,
                task_args: tuple[str, ...] = ()) -> None:
    """`inspect eval DIR/<task>.py` (its openai-api provider) against the server; `task_args` as `-T` options."""
    command = [str(python), "-m", "inspect_ai", "eval", f"{task}.py", "--model", f"openai-api/mmf/{model}",
               "--log-dir", str(logs), "--display", "plain", "--max-retries", "1", "--no-fail-on-error",
               *(option for argument in task_args for option in ("-T", argument))]
    done = subprocess.run(command, env=harness_env(MMF_BASE_URL=base_url, MMF_API_KEY="EMPTY"), cwd=tasks,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and list(logs.glob("*.eval")), done.stdout[-3000:] + done.stderr[-3000:]


def import_logs(harness: str, python: Path, logs: Path, dataset: Path, out: Path, tasks: Path) -> str:
    """`mmfaith import HARNESS` in the harness's environment (inspect's logs need inspect_ai to read); its stdout."""
    command = [str(python), "-m", "mmfaith", "import", harness, str(logs), "--dataset", str(dataset),
               "--out", str(out), "--export", str(tasks)]
    done = subprocess.run(command, env=harness_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def run_harness(harness: str, python: Path, task: str, tasks: Path, model: str, base_url: str, out: Path,
                task_args: tuple[str, ...] = ()) -> None:
    """The harness over the export; `task_args` (inspect's `-T` values) only for inspect."""
    if harness == "lmms-eval":
        assert not task_args
        run_lmms_eval(python, task, tasks, model, base_url, out)
    else:
        run_inspect(python, task, tasks, model, base_url, out, task_args)


def reference_run(family: str, dataset: Path, model: str, base_url: str, out: Path,
                  score_args: tuple[str, ...] = (), run_args: tuple[str, ...] = ()
                  ) -> dict[tuple[str, str], dict[str, Any]]:
    """`mmfaith run FAMILY` (with `run_args`) against the server, scored into out/score; its lines by (id, probe)."""
    assert main(["run", family, "--dataset", str(dataset), "--model", model, "--base-url", base_url,
                 "--out", str(out / "run"), "--no-progress", *run_args]) == 0
    assert main(["score", family, "--dataset", str(dataset), "--predictions", str(out / "run" / "predictions.jsonl"),
                 "--from-run", "--out", str(out / "score"), *score_args]) == 0
    return lines_by_key(out / "run" / "predictions.jsonl")


def family_round_trip(harness: str, python: Path, family: str, model: str, build: Path, tmp_path: Path,
                      requests_per_group: int | None = 1, score_args: tuple[str, ...] = (),
                      run_args: tuple[str, ...] = (), task_args: tuple[str, ...] = ()
                      ) -> tuple[dict[tuple[str, str], dict[str, Any]], dict[tuple[str, str], dict[str, Any]],
                                 dict[str, Any]]:
    """Export, `mmfaith run` (with `run_args`), the harness (with `task_args`) and import against one reference
    server; asserts the harness sent as many requests as `mmfaith run` (`requests_per_group` per probe group
    when given), every (id, probe) is answered as the run answered it with the same family meta and images,
    and the imported predictions score to the run's metrics.json (less provenance) and items.jsonl. Returns
    (imported lines, run lines, import.json)."""
    tasks = tmp_path / "tasks"
    assert main(["export", harness, str(build), "--out", str(tasks), "--no-progress"]) == 0
    dataset = families.get(family).parts().open_dataset(str(build))
    part = harness_part(family)
    groups = sum(len(part.groups(item)) for item in dataset.items)
    with ReferenceServer(dataset, model, family=family) as server:
        run_lines = reference_run(family, build, model, server.base_url, tmp_path / "reference", score_args, run_args)
        seen_by_run = server.requests_seen
        run_harness(harness, python, family_task(family), tasks, model, server.base_url, tmp_path / "logs", task_args)
        assert server.requests_seen - seen_by_run == seen_by_run
        assert requests_per_group is None or seen_by_run == requests_per_group * groups
    imported = tmp_path / "imported" / "predictions.jsonl"
    import_logs(harness, python, tmp_path / "logs", build, imported, tasks)
    lines = lines_by_key(imported)
    assert set(lines) == set(run_lines) and len(lines) == len(run_lines)
    for key, line in lines.items():
        run_line = run_lines[key]
        assert line["response"] == run_line["response"] and line["response"] is not None, key
        for name, value in run_line["meta"].items():
            if name not in RUN_ONLY_META:
                assert line["meta"].get(name) == value, (key, name)
    score = tmp_path / "score"
    assert main(["score", family, "--dataset", str(build), "--predictions", str(imported), "--out", str(score),
                 *score_args]) == 0
    assert scores_without_provenance(score) == scores_without_provenance(tmp_path / "reference" / "score")
    provenance = json.loads((imported.parent / "import.json").read_text(encoding="utf-8"))
    assert provenance["harness"] == harness and provenance["model"] == model and provenance["family"] == family
    assert provenance["prompt_templates_sha256"] == provenance["export"]["prompt_templates_sha256"] \
        == part.templates_sha256
    assert provenance["counts"] == {"lines": len(run_lines), "answered": len(run_lines), "errors": 0, "missing": 0}
    return lines, run_lines, provenance


def failed_calls(harness: str, python: Path, family: str, build: Path, tmp_path: Path,
                 server_dataset: Any, unknown_ids: set[str], model: str = "oracle"
                 ) -> dict[tuple[str, str], dict[str, Any]]:
    """Export the build and run the harness against a server of the reference `model` over `server_dataset` (a part of the
    build: HTTP 400 for the other items); asserts the known items are answered, every probe of the
    unknown ones imports as an error line (response null, meta.error set), and the scorer counts them as
    errors. Returns the unknown items' lines."""
    tasks = tmp_path / "tasks"
    assert main(["export", harness, str(build), "--out", str(tasks), "--no-progress"]) == 0
    with ReferenceServer(server_dataset, model, family=family) as server:
        run_harness(harness, python, family_task(family), tasks, model, server.base_url, tmp_path / "logs")
    imported = tmp_path / "imported" / "predictions.jsonl"
    import_logs(harness, python, tmp_path / "logs", build, imported, tasks)
    lines = lines_by_key(imported)
    failed = {}
    for (item_id, probe), line in lines.items():
        if item_id in unknown_ids:
            assert line["response"] is None and line["meta"]["error"], (item_id, probe)
            failed[(item_id, probe)] = line
        else:
            assert line["response"] is not None and line["meta"]["error"] is None, (item_id, probe)
    assert failed and len(failed) < len(lines)
    return failed
