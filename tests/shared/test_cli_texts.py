"""What the CLI prints counts what it names and speaks of the family it runs (issue 25, item 5).

- `score FAMILY --help`: only SPD-Faith mentions scoring an official response file alone; each
  family's example uses one of its own reference models.
- `serve-reference` counts pairs and perception items apart (VFaith: one pair is one item, and a
  perception item another).
- a run of MCoT's blind model answers the trace of each question and skips its replays (it made no
  crop to intervene on): the summary says how many were asked and how many skipped.
- `report` prints where it wrote and one line per model, in every family (CRM's and MCoT's are
  checked beside their own report tests; SPD-Faith's and VFaith's in the plain-install test).
- a release that fails inside its staging folder leaves neither the folder nor the staging.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mmfaith import families
from mmfaith.cli import main, parser
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.outdir import staged_folder


@pytest.mark.parametrize("family", ["spd-faith", "vfaith", "crm", "mcot"])
def test_score_help_speaks_of_its_own_family(family: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["score", family, "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    model = families.get(family).reference_models[0][0]
    assert f"--predictions runs/{model}/predictions.jsonl" in shown
    assert ("official response file" in shown) == (family == "spd-faith")
    assert "SPD-Faith" not in shown or family == "spd-faith"


def test_serve_reference_counts_pairs_and_perception_items(vfaith_build: Path) -> None:
    pairs = len((vfaith_build / "records.jsonl").read_text().splitlines())
    perception = len((vfaith_build / "perception.jsonl").read_text().splitlines())
    server = subprocess.Popen([str(Path(sys.executable).parent / "mmfaith"), "serve-reference", "vfaith", "--dataset",
                               str(vfaith_build), "--model", "oracle", "--port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        line = server.stdout.readline()
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert f"serving vfaith oracle over {pairs} pairs and {perception} perception items at http://127.0.0.1:" in line


def test_an_mcot_blind_run_counts_its_skipped_replays_apart(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """n questions x (trace + 3 replays) = 4n (id, probe) items; the blind model never zooms, so each
    question's trace is one request and its 3 replays are skipped: n answered, 3n skipped, n requests
    (n: the build's questions, at most --limit 4; 3 on the embedded sample under this round's rules)."""
    build = tmp_path / "build"
    assert main(["build", "mcot", "--out", str(build), "--limit", "4", "--no-progress"]) == 0
    dataset = families.get("mcot").parts().open_dataset(build)
    capsys.readouterr()
    with ReferenceServer(dataset, "blind", family="mcot") as server:
        assert main(["run", "mcot", "--dataset", str(build), "--model", "blind", "--base-url", server.base_url,
                     "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    shown = capsys.readouterr().out
    n = sum(1 for line in (build / "records.jsonl").read_text().splitlines() if line.strip())
    assert 0 < n <= 4
    assert f"blind: {n}/{4 * n} answered, {3 * n} skipped (not asked; why: meta.skipped), 0 failed; {n} requests in" in shown
    assert json.loads((tmp_path / "run" / "run.json").read_text())["counts"] == {
        "expected": 4 * n, "answered": 4 * n, "skipped": 3 * n, "failed": 0}


def test_a_release_failing_inside_its_staging_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "release"
    with pytest.raises(RuntimeError), staged_folder(out, "release") as staging:
        (staging / "data").mkdir()
        raise RuntimeError("the writer failed half-way")
    assert list(tmp_path.iterdir()) == []
