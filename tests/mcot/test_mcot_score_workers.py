"""MCoT's score in chunks of questions on forked workers (evaluators/mcot/score.py): the same files whatever the
number of workers and the chunk size, CircularEval and the position bias included; and what a kept prediction line
holds (`scored_meta`)."""
from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.circular import options_position_bias
from mmfaith.evaluators.mcot.boxes import Region, intersection_area, union_area
from mmfaith.evaluators.mcot.score import McotScoreRequest, score_mcot, scored_meta
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.loaders.mcot.dataset import open_mcot_dataset

FILES = ("metrics.json", "items.jsonl", "report.md")


@pytest.fixture(scope="module")
def circular_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small build and the text-follower's circular run on it (its answers differ from the gold: some right,
    some wrong, some left unread)."""
    folder = tmp_path_factory.mktemp("mcot-workers")
    build = folder / "build"
    # targets up to 10 % of the image and a loose gold cap, as test_mcot_score's build: a dozen questions or more
    assert main(["build", "mcot", "--out", str(build), "--no-progress", "--limit", "16", "--max-subject-area", "0.1",
                 "--gold-margin", "0.5"]) == 0
    with ReferenceServer(open_mcot_dataset(build), "text-follower", family="mcot") as server:
        assert main(["run", "mcot", "--dataset", str(build), "--model", "text-follower", "--base-url",
                     server.base_url, "--out", str(folder / "run"), "--no-progress", "--circular"]) == 0
    return build, folder / "run" / "predictions.jsonl"


def test_workers_and_chunks_give_the_same_files(circular_run: tuple[Path, Path], tmp_path: Path) -> None:
    build, predictions = circular_run
    n = len(open_mcot_dataset(build).items)
    for workers in ("1", "2"):
        assert main(["score", "mcot", "--dataset", str(build), "--predictions", str(predictions), "--from-run",
                     "--out", str(tmp_path / f"cli-{workers}"), "--bootstrap", "50", "--no-explorer",
                     "--workers", workers]) == 0
    request = McotScoreRequest(predictions=predictions, out=tmp_path / "chunked", from_run=True, n_bootstrap=50,
                               dataset=build, workers=2, chunk=4)  # 3 chunks or more, merged in order from 2 workers
    score_mcot(request)
    score_mcot(dataclasses.replace(request, out=tmp_path / "one-a-time", workers=1, chunk=1))
    for name in FILES:
        expected = (tmp_path / "cli-1" / name).read_bytes()
        for other in ("cli-2", "chunked", "one-a-time"):
            assert (tmp_path / other / name).read_bytes() == expected, (other, name)
    metrics = json.loads((tmp_path / "cli-1" / "metrics.json").read_text())
    assert metrics["counts"]["items"] == n and n > 8
    assert metrics["circular"]["trace"]["n_items"] == sum(1 for item in open_mcot_dataset(build).items
                                                          if len(item.record["options"]) > 1)
    assert metrics["position_bias"]["n_golds"] == n


def test_a_bad_workers_count_is_refused_before_reading(circular_run: tuple[Path, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    build, predictions = circular_run
    assert main(["score", "mcot", "--dataset", str(build), "--predictions", str(predictions), "--from-run",
                 "--out", str(tmp_path / "s"), "--workers", "0"]) != 0
    assert "--workers must be 1 or more, not 0" in capsys.readouterr().err


def test_scored_meta_keeps_only_what_scoring_reads() -> None:
    trace = {"answer": "B", "final_answer": "B", "coords": "resized", "image_size": [480, 640],
             "crops": [{"box": [1, 2, 30, 40], "image_number": 2, "sha256": "ab" * 32}],
             "turns": [{"text": "look <tool_call>{}</tool_call>",
                        "tool_calls": [{"arguments": {"bbox_2d": [1, 2, 3, 4]}}, {"error": "bad box"}]},
                       {"text": "<answer>B</answer>", "tool_calls": []}]}
    assert scored_meta({"trace": trace, "finish_reason": "stop", "generation": {"seed": 1}}) == {
        "trace": {"answer": "B", "crops": [{"box": [1, 2, 30, 40]}], "reply": "<answer>B</answer>", "tool_calls": 2}}
    replay = {"answer": "A", "continuation": "continue", "no_image": True,
              "injection": {"changed": True, "edits": [{"before": "1", "after": "2"}], "texts": ["a long trace"]}}
    assert scored_meta(replay) == {"answer": "A", "no_image": True, "injection": {"changed": True}}
    assert scored_meta({"trace": {"answer": None, "turns": []}}) == {
        "trace": {"answer": None, "crops": [], "reply": None, "tool_calls": 0}}


def test_options_position_bias_over_the_multiple_choice_records() -> None:
    records = [{"options": [{"label": "A"}, {"label": "B"}], "answer": "B"},
               {"options": [], "answer": "a cup"},  # free-form: not counted
               {"options": [{"label": "A"}, {"label": "B"}, {"label": "C"}], "answer": "A"}]
    bias = options_position_bias(records, ["A", "Z"])  # "Z" is no option's label: unparsed
    assert bias == {"letters": {"A": {"answered": 1.0, "gold": 0.5}, "B": {"answered": 0.0, "gold": 0.5},
                                "C": {"answered": 0.0, "gold": 0.0}}, "n_answers": 1, "n_golds": 2}
    with pytest.raises(ValueError):
        options_position_bias(records, ["A"])


def test_intersection_area_equals_the_union_of_one_box_clipped() -> None:
    """The judge's and grounding's constant-time intersection (boxes.intersection_area) against the exact sweep
    (boxes.union_area) on random boxes, disjoint, touching and nested ones included."""
    rng = random.Random(0)
    for _ in range(2000):
        a, b = (Region(x, y, x + rng.randint(0, 30), y + rng.randint(0, 30))
                for x, y in ((rng.randint(0, 40), rng.randint(0, 40)) for _ in range(2)))
        assert intersection_area(a, b) == union_area([a], within=b) == intersection_area(b, a)
    assert intersection_area(Region(0, 0, 10, 10), Region(10, 0, 20, 10)) == 0  # touching: no pixel shared
