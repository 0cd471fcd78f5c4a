"""CRM through inspect-ai 0.3.285 (in its own environment) against mmfaith's reference server over HTTP:
export, `inspect eval`, import, score (Sentence-BERT, the test extra); the imported predictions answer
every (id, probe) as `mmfaith run crm` does and score to the same metrics.json and items.jsonl, for the
grounded model (the scale's good end) and the hallucinator (SDR = AFR = 0). The reference models tell
the chain of thought from the final answer by the conversation (an assistant turn before the last
user turn), so a matching answer proves the answer round continued the conversation. lmms-eval's
agentic rounds cannot: its export is refused with one line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.crm.prompts import TEMPLATES_SHA256
from mmfaith.loaders.crm import open_crm_dataset

from tests.harness_families import failed_calls, family_round_trip
from tests.harness_round_trip import harness_python

pytestmark = pytest.mark.e2e  # long: the test command runs it first (tests/conftest.py)


@pytest.fixture(scope="module")
def crm_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("crm-harness") / "build"
    assert main(["build", "crm", "--out", str(out), "--max-items", "4", "--mask-style", "black",
                 "--no-progress"]) == 0
    return out


@pytest.fixture(scope="module")
def inspect_python() -> Path:
    return harness_python("MMFAITH_INSPECT_PYTHON", ".venv-inspect", "tools/install-inspect.sh")


@pytest.mark.parametrize("model", ["grounded", "hallucinator"])
def test_crm_inspect_round_trip_scores_as_mmfaith_run(model: str, crm_build: Path, inspect_python: Path,
                                                      tmp_path: Path) -> None:
    lines, run_lines, provenance = family_round_trip("inspect", inspect_python, "crm", model, crm_build, tmp_path,
                                                     requests_per_group=2, score_args=("--bootstrap", "50"))
    dataset = open_crm_dataset(crm_build)
    assert len(lines) == 2 * sum(2 + len(item.variants) for item in dataset.items)  # + the re-sampled original
    for (item_id, probe), line in lines.items():  # the run's temperatures per round: 0.2 steps, 0 answer
        assert line["meta"]["temperature"] == (0.2 if probe.endswith("_cot") else 0.0), (item_id, probe)
        assert line["meta"]["finish_reason"] == "stop"
        assert line["meta"]["prompt_tokens"] == run_lines[(item_id, probe)]["meta"]["prompt_tokens"], (item_id, probe)
    assert provenance["prompt_templates_sha256"] == TEMPLATES_SHA256
    metrics = json.loads((tmp_path / "score" / "metrics.json").read_text())
    # the reference models' stated ends of the scale (evaluators/crm/reference.py): the grounded model
    # abstains whenever the evidence is masked, the hallucinator answers as on the original
    expected = {"grounded": (1.0, 1.0, 0.0), "hallucinator": (0.0, 0.0, 1.0)}[model]
    specific = metrics["by_mode"]["specific"]["metrics"]
    assert (specific["SDR"], specific["AFR"], specific["HR"]) == expected


def test_crm_failed_calls_import_as_error_lines(crm_build: Path, inspect_python: Path, tmp_path: Path) -> None:
    """A server that knows only the first item (HTTP 400 for the others): their chains of thought import as
    inspect's sample errors and their final answers as not asked, never as answers."""
    from dataclasses import replace

    dataset = open_crm_dataset(crm_build)
    known = replace(dataset, items=dataset.items[:1])
    unknown = {item.id for item in dataset.items[1:]}
    failed = failed_calls("inspect", inspect_python, "crm", crm_build, tmp_path, known, unknown,
                          "grounded")
    for (_, probe), line in failed.items():
        if probe.endswith("_cot"):
            assert line["meta"]["error"].startswith("inspect sample error") and "400" in line["meta"]["error"]
        else:
            assert line["meta"]["error"].startswith("not asked: this image's chain of thought failed")


def test_crm_lmms_eval_export_is_refused_in_one_line(crm_build: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "lmms-eval", str(crm_build), "--out", str(tmp_path / "tasks"), "--no-progress"]) != 0
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "continues the conversation" in error and "mmfaith export inspect" in error
    assert not list((tmp_path / "tasks").glob("*.yaml"))


def test_crm_export_rows_are_the_run_conversations(crm_build: Path) -> None:
    """Without a harness: one dependent row per (item, image shown) and one for the re-sampled original, the
    steps at 0.2 then the answer at 0 continuing the conversation, not asked after failed steps (`mmfaith run
    crm`'s defaults)."""
    from mmfaith.evaluators.crm.prompts import answer_prompt, cot_prompt
    from mmfaith.evaluators.harness.rows import export_rows
    from mmfaith.evaluators.harness.runtime import round_of

    rows = [row for task_rows in export_rows(str(crm_build), progress=False).by_task.values() for row in task_rows]
    dataset = open_crm_dataset(crm_build)
    assert len(rows) == sum(2 + len(item.variants) for item in dataset.items)
    items = {item.id: item for item in dataset.items}
    for row in rows:
        item = items[row["id"]]
        image = row["probes"][0].removesuffix("_cot")
        assert row["kind"] == "dependent" and row["probes"] == [f"{image}_cot", f"{image}_answer"]
        original = image in ("original", "resample")
        assert row["image_sha256"] == [(item.original if original else item.variants[image]).sha256]
        cot, answer = round_of(row, 0, []), round_of(row, 1, ["1. steps"])
        assert (cot.text, cot.temperature, cot.continues) == (cot_prompt(item.record), 0.2, False)
        assert (answer.text, answer.temperature, answer.continues) == (answer_prompt(item.record), 0.0, True)
        assert round_of(row, 1, [None]).not_asked.startswith("not asked: this image's chain of thought failed")
