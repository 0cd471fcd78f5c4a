"""Scores and reports equal, number for number, those of the code before streaming scoring (issue 34).

tests/fixtures/score_golden/ holds, per family, the metrics.json and items.jsonl of two models on a
small build of the embedded sample, and the comparison.json of `report` over the two, as written by
the code of main before the scoring changes of issue 34 (the compiled schema checks, the chunked
bootstrap, scipy's McNemar). The builds are deterministic (same settings and seed, same bytes), so
this test builds them again, runs the family's oracle (its first reference model) over HTTP as a user does,
derives an always-A model's predictions from its lines (every answer "A"; tests/oracle_and_always_a.py), scores
both and reports,
and compares everything but the provenance's version and hashes. MMFAITH_WRITE_GOLDEN=1 writes the
fixtures instead: that is how they were made, by main's code (a copy of main importable as
`mmfaith`, pytest run with --import-mode=importlib from that folder). A change that means to
change scores or builds regenerates them the same way from the code before it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mmfaith.cli import main
from tests.oracle_and_always_a import oracle_and_always_a

GOLDEN = Path(__file__).parent.parent / "fixtures" / "score_golden"
BUILDS = {
    "spd-faith": ["--per-tier", "1", "--multi", "2", "--controls", "1", "--inpainter", "telea"],
    "vfaith": ["--per-template", "1", "--inpainter", "telea"],
    "crm": ["--max-items", "6"],
    "mcot": ["--limit", "12"],
}
VOLATILE = ("mmfaith_version", "predictions_sha256", "dataset", "created")


def _stable(value):
    """The content with the provenance's volatile fields (temporary paths, versions, file hashes) dropped."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _outputs(folder: Path, name: str) -> dict:
    build, predictions_of = oracle_and_always_a(folder, name, BUILDS[name])
    outputs = {}
    for model, predictions in predictions_of.items():
        quiet = ["--no-explorer"] if model == "always-a" else []  # the scores are the same without the explorer
        assert main(["score", name, "--dataset", str(build), "--predictions", str(predictions), "--from-run",
                     "--out", str(folder / model), "--bootstrap", "200", "--seed", "3", *quiet]) == 0
        assert (folder / model / "index.html").is_file() == (not quiet)
        outputs[f"{model}.metrics"] = json.loads((folder / model / "metrics.json").read_text())
        outputs[f"{model}.items"] = [json.loads(line) for line in (folder / model / "items.jsonl").read_text().splitlines()]
    assert main(["report", str(folder / "oracle"), str(folder / "always-a"), "--out", str(folder / "report"),
                 "--bootstrap", "200", "--seed", "3", "--no-explorer"]) == 0
    assert not (folder / "report" / "index.html").exists()
    outputs["comparison"] = json.loads((folder / "report" / "comparison.json").read_text())
    return _stable(outputs)


@pytest.mark.parametrize("name", list(BUILDS))
def test_scores_equal_those_of_the_code_before(name: str, tmp_path: Path) -> None:
    outputs = _outputs(tmp_path, name)
    golden = GOLDEN / f"{name}.json"
    if os.environ.get("MMFAITH_WRITE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(json.dumps(outputs, indent=1, sort_keys=True) + "\n")
    expected = json.loads(golden.read_text())
    for key in expected:
        assert outputs[key] == expected[key], key
