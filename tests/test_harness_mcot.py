"""MCoT is not exported to the harnesses (docs/harnesses.md#mcot): `mmfaith export lmms-eval|inspect` and
`mmfaith import lmms-eval|inspect` over an MCoT dataset stop with one line saying so and what to run,
and write nothing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.mcot.family import HARNESS_REFUSED

from .mcot_fixtures import write_vstar_folder


@pytest.fixture(scope="module")
def mcot_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mcot-harness")
    assert main(["build", "mcot", "--source", "vstar", "--source-path", str(write_vstar_folder(root / "src", 2)),
                 "--out", str(root / "build")]) == 0
    return root / "build"


@pytest.mark.parametrize("harness", ["lmms-eval", "inspect"])
def test_mcot_export_is_refused_in_one_line(harness: str, mcot_build: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", harness, str(mcot_build), "--out", str(tmp_path / "tasks"), "--no-progress"]) != 0
    assert capsys.readouterr().err.strip() == f"mmfaith: error: {HARNESS_REFUSED}"
    assert not (tmp_path / "tasks").exists()


def test_mcot_import_is_refused_in_one_line(mcot_build: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """An lmms-eval samples file naming an MCoT item (as a hand-made task would log it) is not imported."""
    from .test_harness_export import samples_file

    key = json.dumps({"id": "vstar-0", "probes": ["trace"]})
    logs = samples_file(tmp_path / "logs", [{"target": key, "filtered_resps": "<answer>A</answer>"}])
    out = tmp_path / "imported" / "predictions.jsonl"
    assert main(["import", "lmms-eval", str(logs), "--dataset", str(mcot_build), "--model", "m",
                 "--out", str(out)]) != 0
    assert capsys.readouterr().err.strip() == f"mmfaith: error: {HARNESS_REFUSED}" and not out.exists()
