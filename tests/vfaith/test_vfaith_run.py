"""VFaith's probes, run through the shared engine against the real reference server over HTTP, and scored.

The two reference models bracket the scale (evaluators/vfaith/reference.py): the oracle reads 1 on
every accuracy and has no repeat ratio; the memorizer reads raw 1, edit 0, delta -1, repeat 1 and
perception 0. `mmfaith report` puts them side by side in the paper's Table 2 layout.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.evaluators.vfaith.prompts import perception_prompt, question_prompt
from mmfaith.loaders.vfaith.dataset import open_vfaith_dataset
from tests.conftest import read_records


def _run_and_score(build: Path, model: str, tmp_path: Path) -> dict:
    dataset = open_vfaith_dataset(build)
    run_dir, score_dir = tmp_path / f"run-{model}", tmp_path / f"score-{model}"
    with ReferenceServer(dataset, model, family="vfaith") as server:
        args = ["run", "vfaith", "--dataset", str(build), "--model", model, "--base-url", server.base_url,
                "--out", str(run_dir), "--no-progress"]
        assert main(args) == 0
        expected = 2 * len(dataset.pairs) + len(dataset.perception)
        assert server.requests_seen == expected
        assert main(args) == 0  # a second run resumes: nothing is asked again
        assert server.requests_seen == expected
    assert main(["score", "vfaith", "--dataset", str(build), "--predictions", str(run_dir / "predictions.jsonl"),
                 "--out", str(score_dir), "--from-run", "--bootstrap", "200"]) == 0
    return json.loads((score_dir / "metrics.json").read_text())


def test_oracle_and_memorizer_read_exactly_the_ends_of_the_scale(vfaith_build: Path, tmp_path: Path) -> None:
    oracle = _run_and_score(vfaith_build, "oracle", tmp_path)
    assert oracle["overall"] == {"raw_accuracy": 1.0, "edit_accuracy": 1.0, "delta": 0.0, "repeat_ratio": None,
                                 "repeat_ratio_own": None, "perception_accuracy": 1.0}
    assert oracle["mcnemar_raw_vs_edit"]["p_value"] == 1.0
    memorizer = _run_and_score(vfaith_build, "memorizer", tmp_path)
    assert memorizer["overall"] == {"raw_accuracy": 1.0, "edit_accuracy": 0.0, "delta": -1.0, "repeat_ratio": 1.0,
                                    "repeat_ratio_own": 1.0, "perception_accuracy": 0.0}
    n_pairs = len(read_records(vfaith_build))
    test = memorizer["mcnemar_raw_vs_edit"]
    assert (test["b_raw_right_edit_wrong"], test["c_raw_wrong_edit_right"]) == (n_pairs, 0)
    assert test["p_value"] == pytest.approx(2 * 0.5 ** n_pairs)  # exact: both discordant cells, b = n, c = 0
    for metrics in (oracle, memorizer):
        assert set(metrics["by_category"]) == {"RWS", "REA"}
        assert metrics["provenance"]["family"] == "vfaith" and metrics["counts"]["answered_share"] == 1.0
    assert memorizer["by_category"]["REA"]["delta"] == -1.0 and memorizer["ci95"]["edit_accuracy"] == [0.0, 0.0]
    out = tmp_path / "report"
    assert main(["report", str(tmp_path / "score-oracle"), str(tmp_path / "score-memorizer"), "--out", str(out),
                 "--bootstrap", "100"]) == 0
    table = (out / "report.md").read_text()
    assert "| memorizer | 1.000 | 0.000 | -1.000 |" in table and "RWS Raw" in table
    assert json.loads((out / "comparison.json").read_text())["paired"][0]["metrics"]["edit_accuracy"]["difference"] == 1.0


def test_each_probe_shows_its_one_image_and_the_question(vfaith_build: Path, tmp_path: Path) -> None:
    dataset = open_vfaith_dataset(vfaith_build)
    run_dir = tmp_path / "run"
    with ReferenceServer(dataset, "oracle", family="vfaith") as server:
        assert main(["run", "vfaith", "--dataset", str(vfaith_build), "--model", "oracle", "--base-url",
                     server.base_url, "--out", str(run_dir), "--no-progress", "--limit", "2"]) == 0
    lines = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    pair = dataset.pairs[0]
    shown = {line["probe"]: line["meta"]["images"] for line in lines if line["id"] == pair.id}
    assert shown == {"original": [{"sha256": pair.record["image_original_sha256"]}],
                     "edited": [{"sha256": pair.record["image_edited_sha256"]}]}
    assert "\\boxed{" in question_prompt(pair.record["question"], pair.record["options"])
    assert "Several may be true" in perception_prompt(dataset.perception[0].record["options"])
