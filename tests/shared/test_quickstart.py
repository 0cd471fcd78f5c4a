"""`mmfaith quickstart --family spd-faith|vfaith`: build, the reference models over real HTTP, scores, one report
(the suite quickstart, with no --family, is in tests/shared/test_evaluate.py)."""
from __future__ import annotations

import json
from pathlib import Path

from mmfaith.cli import main

PERFECT = ("DS", "DQR", "existence_rate", "TF1", "CF1", "consistency_ratio", "DRF")


def test_quickstart_reads_perfect_for_the_oracle_and_zero_for_the_blind_model(tmp_path: Path, capsys) -> None:
    assert main(["quickstart", "--family", "spd-faith", "--out", str(tmp_path), "--per-tier", "1", "--multi", "2",
                 "--controls", "1", "--no-progress"]) == 0
    assert "report.md" in capsys.readouterr().out
    oracle = json.loads((tmp_path / "scores" / "oracle" / "metrics.json").read_text())
    blind = json.loads((tmp_path / "scores" / "blind" / "metrics.json").read_text())
    assert {key: oracle["overall"][key] for key in PERFECT} == {key: 1.0 for key in PERFECT}
    assert oracle["overall"]["contradiction_rate"] == 0.0 and oracle["control"]["false_alarm_rate"] == 0.0
    assert {key: blind["overall"][key] for key in ("DS", "DQR", "existence_rate")} == {
        "DS": 0.0, "DQR": 0.0, "existence_rate": 0.0}
    report = (tmp_path / "report" / "report.md").read_text()
    assert "| DS |" in report and "pixel-diff" in report and "oracle" in report and "blind" in report
    assert (tmp_path / "report" / "compare_overall.png").read_bytes()[:4] == b"\x89PNG"
    # The validity controls: the prior beside the others, and its --no-image run paired into gain and leakage.
    comparison = json.loads((tmp_path / "report" / "comparison.json").read_text())
    assert comparison["models"][-2:] == ["prior", "prior (no image)"] and comparison["no_image"][-1] is True
    assert comparison["multimodal_gain"][0]["model"] == "prior" and comparison["leakage"]
    assert "Multimodal gain" in report and "Leakage" in report


def test_the_vfaith_quickstart_brackets_the_scale_offline(tmp_path: Path, capsys) -> None:
    assert main(["quickstart", "--family", "vfaith", "--out", str(tmp_path), "--per-template", "1",
                 "--no-progress"]) == 0
    assert "report.md" in capsys.readouterr().out
    oracle = json.loads((tmp_path / "scores" / "oracle" / "metrics.json").read_text())["overall"]
    memorizer = json.loads((tmp_path / "scores" / "memorizer" / "metrics.json").read_text())["overall"]
    assert (oracle["raw_accuracy"], oracle["edit_accuracy"], oracle["perception_accuracy"]) == (1.0, 1.0, 1.0)
    assert (memorizer["edit_accuracy"], memorizer["repeat_ratio"], memorizer["delta"]) == (0.0, 1.0, -1.0)
    report = (tmp_path / "report" / "report.md").read_text()
    assert "| memorizer |" in report and "| prior |" in report
    # CircularEval beside the first-order accuracy: the oracle is right in every rotation.
    assert json.loads((tmp_path / "scores" / "oracle" / "metrics.json").read_text())["circular"]["original"][
        "accuracy_circular"] == 1.0
    comparison = json.loads((tmp_path / "report" / "comparison.json").read_text())
    assert comparison["multimodal_gain"][0]["model"] == "memorizer"
    assert "accuracy_circular" in report and "Multimodal gain" in report and "Answer-position bias" in report
