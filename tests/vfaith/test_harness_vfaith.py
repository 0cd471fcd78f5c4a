"""VFaith through the real harnesses (lmms-eval 0.7.3, inspect-ai 0.3.285, each in its own environment)
against mmfaith's reference server over HTTP: export, run, import, score; the imported predictions
answer every (id, probe) as `mmfaith run vfaith` does and score to the same metrics.json and items.jsonl,
for the oracle (perfect) and the memorizer (raw 1, edit 0: not perfect)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from mmfaith.evaluators.vfaith.prompts import TEMPLATES_SHA256
from mmfaith.loaders.vfaith.dataset import open_vfaith_dataset

from tests.harness_families import failed_calls, family_round_trip
from tests.harness_round_trip import harness_python

pytestmark = pytest.mark.e2e  # long: the test command runs it first (tests/conftest.py)

HARNESSES = {"lmms-eval": ("MMFAITH_LMMS_EVAL_PYTHON", ".venv-lmms-eval", "tools/install-lmms-eval.sh"),
             "inspect": ("MMFAITH_INSPECT_PYTHON", ".venv-inspect", "tools/install-inspect.sh")}


@pytest.mark.parametrize("harness", sorted(HARNESSES))
@pytest.mark.parametrize("model", ["oracle", "memorizer"])
def test_vfaith_round_trip_scores_as_mmfaith_run(harness: str, model: str, vfaith_build: Path, tmp_path: Path) -> None:
    python = harness_python(*HARNESSES[harness])
    lines, _, provenance = family_round_trip(harness, python, "vfaith", model, vfaith_build, tmp_path,
                                             score_args=("--bootstrap", "200"))
    dataset = open_vfaith_dataset(vfaith_build)
    # every pair's original and edited probe, every perception item's one probe, each showing its own image
    assert len(lines) == 2 * len(dataset.pairs) + len(dataset.perception)
    for pair in dataset.pairs:
        assert lines[(pair.id, "original")]["meta"]["images"] == [{"sha256": pair.record["image_original_sha256"]}]
        assert lines[(pair.id, "edited")]["meta"]["images"] == [{"sha256": pair.record["image_edited_sha256"]}]
    metrics = json.loads((tmp_path / "score" / "metrics.json").read_text())
    # the reference models' ends of the scale (evaluators/vfaith/reference.py): by definition, the oracle
    # answers every image's gold, the memorizer the original's answer everywhere
    expected = {"oracle": (1.0, 1.0, 1.0), "memorizer": (1.0, 0.0, 0.0)}[model]
    overall = metrics["overall"]
    assert (overall["raw_accuracy"], overall["edit_accuracy"], overall["perception_accuracy"]) == expected
    assert provenance["prompt_templates_sha256"] == TEMPLATES_SHA256
    if harness == "lmms-eval":
        config = (tmp_path / "tasks" / "mmfaith_vfaith_edited.yaml").read_text()
        assert "output_type: generate_until" in config and '"until": []' in config and TEMPLATES_SHA256 in config
        assert {path.name for path in (tmp_path / "tasks").glob("*.yaml")} == {
            "mmfaith_vfaith.yaml", "mmfaith_vfaith_original.yaml", "mmfaith_vfaith_edited.yaml",
            "mmfaith_vfaith_perception.yaml"}
    else:
        assert "def mmfaith_vfaith(" in (tmp_path / "tasks" / "mmfaith_vfaith.py").read_text()


@pytest.mark.parametrize("harness", sorted(HARNESSES))
def test_vfaith_failed_calls_import_as_error_lines(harness: str, vfaith_build: Path, tmp_path: Path) -> None:
    """A server that knows only the first two pairs (HTTP 400 for the others): the others' probes import as
    error lines with the harness's failure text, never as answers, and the scorer counts them unanswered."""
    from mmfaith.cli import main

    python = harness_python(*HARNESSES[harness])
    dataset = open_vfaith_dataset(vfaith_build)
    known = dataclasses.replace(dataset, pairs=dataset.pairs[:2])
    unknown = {pair.id for pair in dataset.pairs[2:]}
    failed = failed_calls(harness, python, "vfaith", vfaith_build, tmp_path, known, unknown)
    assert len(failed) == 2 * len(unknown)
    marker = "[LMMS_EVAL_REQUEST_FAILED" if harness == "lmms-eval" else "inspect sample error"
    assert all(line["meta"]["error"].startswith(marker) and "400" in line["meta"]["error"] for line in failed.values())
    score = tmp_path / "score"
    assert main(["score", "vfaith", "--dataset", str(vfaith_build), "--predictions",
                 str(tmp_path / "imported" / "predictions.jsonl"), "--out", str(score), "--bootstrap", "50"]) == 0
    counts = json.loads((score / "metrics.json").read_text())["counts"]
    assert counts["answered_share"] < 1.0


def test_vfaith_export_rows_are_the_run_probes(vfaith_build: Path, tmp_path: Path) -> None:
    """Without a harness: the export's rows are every probe once, with `mmfaith run vfaith`'s text and image."""
    from mmfaith.evaluators.harness.rows import export_rows
    from mmfaith.evaluators.vfaith.run import probe_images, probe_text

    rows = export_rows(str(vfaith_build), progress=False)
    dataset = open_vfaith_dataset(vfaith_build)
    assert sorted(rows.by_task) == ["mmfaith_vfaith_edited", "mmfaith_vfaith_original", "mmfaith_vfaith_perception"]
    by_key = {(row["id"], row["probes"][0]): row for task_rows in rows.by_task.values() for row in task_rows}
    expected = {(item.id, probe): (probe_text(item), image.sha256) for item in dataset.items
                for probe, image in probe_images(item).items()}
    assert {key: (row["prompt"], row["image_sha256"][0]) for key, row in by_key.items()} == expected
    assert all(row["kind"] == "independent" and len(row["image_sha256"]) == 1 for row in by_key.values())
