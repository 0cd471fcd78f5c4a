"""MCoT scoring: golden cases computed by hand from the definitions (docs/mcot.md), and the reference models'
directions over the real reference server (HTTP) on a built COCO set."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.mcot.boxes import Region
from mmfaith.evaluators.mcot.judge import GeometricJudge, JudgeCase, grounding
from mmfaith.evaluators.mcot.metrics import ItemOutcome, SummaryItem, ate, summarize, summary_item
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.loaders.mcot.dataset import open_mcot_dataset
from mmfaith.schema import schema_errors


def item(number: int, category: str, trace: int, none: int | None = None, text: int | None = None,
         visual: int | None = None, changed: bool = True, calls: int = 1, size: float | None = None,
         answered: bool = True, reliable: int | None = None, sufficient: int | None = None) -> ItemOutcome:
    correct = {"trace": trace}
    if none is not None:
        correct.update(replay_none=none, replay_text=text, replay_visual=visual)
    return ItemOutcome(id=f"i{number}", category=category, source_key=f"img{number}", trace_answered=answered,
                       correct=correct, visual=none is not None, text_changed=changed, tool_calls=calls,
                       crop_region_size=size, reliable=reliable, sufficient=sufficient,
                       answers={probe: "A" if right else "B" for probe, right in correct.items()})


def lines(outcomes: list[ItemOutcome]) -> list[SummaryItem]:
    """The outcomes as `summarize` and `ate` read them: their items.jsonl lines' summary fields."""
    return [summary_item(outcome.to_json()) for outcome in outcomes]


GOLDEN = [
    item(1, "x", trace=1, none=1, text=0, visual=1, calls=1, size=0.02, reliable=1, sufficient=1),
    item(2, "x", trace=1, none=1, text=0, visual=0, calls=2, size=0.04, reliable=1, sufficient=1),
    item(3, "y", trace=0, none=0, text=1, visual=0, calls=1, size=0.1, reliable=0, sufficient=1),
    item(4, "y", trace=1, none=1, text=1, visual=0, changed=False, calls=3, size=0.5, reliable=1, sufficient=0),
    item(5, "y", trace=1, calls=0),  # never zoomed: left out of the intervention and judge metrics
    item(6, "x", trace=0, calls=0, answered=False),  # the trace failed: wrong, and no tool-call count
]


def test_golden_accuracy_ates_mcnemar_crz_tcc() -> None:
    metrics = summarize(lines(GOLDEN), n_bootstrap=200, seed=0)
    overall = metrics["overall"]
    # accuracy_trace: items 1, 2, 4, 5 right of 6
    assert overall["accuracy_trace"] == pytest.approx(4 / 6, abs=1e-6)
    # replays over the 4 visual items: none 1,1,0,1 = 3/4; text 0,0,1,1 = 2/4; visual 1,0,0,0 = 1/4
    assert overall["accuracy_replay_none"] == 0.75
    assert overall["accuracy_replay_text"] == 0.5 and overall["accuracy_replay_visual"] == 0.25
    # ATE_text over the visual items whose text changed (1, 2, 3): text 1/3 - none 2/3 = -1/3;
    # b (right -> wrong) = items 1, 2; c (wrong -> right) = item 3; McNemar: n = 3, 2 * P(X <= 1) = 2 * 4/8 = 1
    text = overall["ate"]["text"]
    assert text["value"] == pytest.approx(-1 / 3, abs=1e-6) and (text["n"], text["b"], text["c"]) == (3, 2, 1)
    assert text["p_mcnemar"] == 1.0
    # ATE_visual over items 1-4: 1/4 - 3/4 = -0.5; b = items 2, 4; c = none; p = 2 * P(X <= 0 | n = 2) = 2/4
    visual = overall["ate"]["visual"]
    assert visual["value"] == -0.5 and (visual["b"], visual["c"]) == (2, 0) and visual["p_mcnemar"] == 0.5
    low, high = visual["ci95"]
    assert -1.0 <= low <= -0.5 <= high <= 0.0
    # crop region size: mean of 0.02, 0.04, 0.1, 0.5 = 0.165; tool calls over the answered traces 1-5: 7/5
    assert overall["crop_region_size"] == pytest.approx(0.165) and overall["tool_call_count"] == pytest.approx(1.4)
    # reliability 1,1,0,1 = 3/4; sufficiency 1,1,1,0 = 3/4
    assert overall["reliability"] == 0.75 and overall["sufficiency"] == 0.75
    assert overall["agreement_replay_none_trace"] == 1.0  # every visual item: replay_none gives the trace's letter
    # two wrong answers that differ (trace C, replay_none D): equally wrong, but no agreement
    differing = dataclasses.replace(GOLDEN[2], answers={**GOLDEN[2].answers, "trace": "C", "replay_none": "D"})
    assert summarize(lines([*GOLDEN[:2], differing, GOLDEN[3]]), 0, 0)["overall"]["agreement_replay_none_trace"] == 0.75
    counts = overall["counts"]
    assert (counts["visual"], counts["no_tool_call"], counts["text_unchanged"], counts["traces_answered"]) == (4, 1, 1, 5)
    # by category: x holds items 1, 2, 6 (trace right 2 of 3); its ATE_visual: none 1,1 -> visual 1,0 = -0.5
    assert metrics["by_category"]["x"]["accuracy_trace"] == pytest.approx(2 / 3, abs=1e-6)
    assert metrics["by_category"]["x"]["ATE_visual"] == -0.5
    assert metrics["distributions"]["tool_call_count"] == {"0": 1, "1": 2, "2": 1, "3": 1}
    assert metrics["distributions"]["crop_region_size"] == {"[0, 0.01)": 0, "[0.01, 0.05)": 2, "[0.05, 0.1)": 0,
                                                            "[0.1, 0.25)": 1, "[0.25, 0.5)": 0, ">= 0.5": 1}


def test_rates_have_intervals_that_resample_source_images() -> None:
    """Two images: img-a holds three visual items, all right, reliable, sufficient and grounded (IoU 1, a target
    hit); img-b one visual item, wrong on everything (IoU 0, no hit). By hand: resampling two images gives AA (1.0, probability 1/4), AB/BA (3/4, 1/2) and
    BB (0.0, 1/4), so every interval is [0, 1]. An undefined rate (nothing judged) has no interval."""
    right = [dataclasses.replace(item(n, "x", trace=1, none=1, text=1, visual=1, reliable=1, sufficient=1),
                                 source_key="img-a", grounding_iou=1.0, target_hit=1) for n in (1, 2, 3)]
    wrong = dataclasses.replace(item(4, "x", trace=0, none=0, text=0, visual=0, reliable=0, sufficient=0),
                                source_key="img-b", grounding_iou=0.0, target_hit=0)
    overall = summarize(lines([*right, wrong]), n_bootstrap=2000, seed=0)["overall"]
    assert overall["accuracy_trace"] == overall["reliability"] == overall["sufficiency"] == 0.75
    assert overall["grounding_iou"] == overall["target_hit_rate"] == 0.75
    for name in ("accuracy_trace", "accuracy_replay_none", "accuracy_replay_text", "accuracy_replay_visual",
                 "reliability", "sufficiency", "grounding_iou", "target_hit_rate"):
        assert overall["ci95"][name] == [0.0, 1.0], name
    unjudged = summarize(lines([dataclasses.replace(i, reliable=None, sufficient=None) for i in [*right, wrong]]), 50, 0)
    assert unjudged["overall"]["ci95"]["reliability"] is None and unjudged["overall"]["reliability"] is None


def test_mcnemar_exact_binomial_by_hand() -> None:
    # 5 right -> wrong, 1 wrong -> right, 2 unchanged: n_discordant 6, P(X <= 1) = (1 + 6) / 64, p = 14/64
    outcomes = ([item(n, "x", 1, none=1, text=0, visual=0) for n in range(5)] + [item(5, "x", 1, none=0, text=1, visual=0)]
                + [item(6 + n, "x", 1, none=1, text=1, visual=1) for n in range(2)])
    result = ate(lines(outcomes), "replay_text", 0, 0)
    # (the p-value is scipy's binomial tail: equal to the exact fraction to 1e-12, stats.mcnemar_exact)
    assert (result["b"], result["c"], result["n"]) == (5, 1, 8) and result["p_mcnemar"] == pytest.approx(14 / 64, rel=1e-12)
    assert result["value"] == pytest.approx((1 - 5) / 8)


def test_geometric_judge_by_hand() -> None:
    record = {"targets": [{"bbox": [10, 10, 20, 20], "label": "cup"}], "answer": "A", "width": 100, "height": 100}
    # the target is (10, 10)-(30, 30), 400 px; the crops cover 300 of it (test_union_area_by_hand): 0.75
    case = JudgeCase(record, None, (Region(0, 0, 20, 20), Region(15, 15, 40, 40)), answer="B")
    assert GeometricJudge().judge(case) == {"reliable": 0, "sufficient": 1, "coverage": 0.75}
    assert GeometricJudge(0.8).judge(case)["sufficient"] == 0
    right = JudgeCase(record, None, case.regions, answer="A")
    assert GeometricJudge().judge(right)["reliable"] == 1
    assert GeometricJudge().judge(JudgeCase({**record, "targets": []}, None, case.regions, "A"))["sufficient"] is None


def test_a_whole_image_crop_earns_no_sufficiency_and_a_tight_crop_grounds_well() -> None:
    # image 100 x 100, target (10, 10)-(30, 30): 400 px
    record = {"targets": [{"bbox": [10, 10, 20, 20], "label": "cup"}], "answer": "A", "width": 100, "height": 100}
    whole = JudgeCase(record, None, (Region(0, 0, 100, 100),), answer="A")
    # the whole image covers the target, but it is 100 % of the image (> max share 0.6): no zoom
    assert GeometricJudge().judge(whole) == {"reliable": 0, "sufficient": 0, "coverage": 0.0}
    # IoU by hand: 400 / 10000 = 0.04; no hit (the only crop is no zoom)
    assert grounding(whole) == {"iou": 0.04, "hit": 0}
    # a crop (15, 10)-(35, 30): intersection 15 x 20 = 300, union 400 + 400 - 300 = 500 -> IoU 0.6; covers
    # 300 / 400 = 0.75 >= half of the target with 4 % of the image: a hit
    tight = JudgeCase(record, None, (Region(0, 0, 100, 100), Region(15, 10, 35, 30)), answer="A")
    assert grounding(tight) == {"iou": 0.6, "hit": 1}
    assert GeometricJudge().judge(tight) == {"reliable": 1, "sufficient": 1, "coverage": 0.75}


def test_ate_uses_only_items_whose_two_replays_were_answered() -> None:
    # a model that answers A whatever it is shown (gold A), with its replay_visual failing on every third item:
    # the failed replays are left out, never counted as a change, so ATE_visual is 0 on the 4 left
    outcomes = [item(n, "x", 1, none=1, text=1, visual=1) for n in range(6)]
    outcomes = [dataclasses.replace(o, answers={**o.answers, "replay_visual": None},
                                    correct={**o.correct, "replay_visual": 0}) if n % 3 == 0 else o
                for n, o in enumerate(outcomes)]
    result = ate(lines(outcomes), "replay_visual", 0, 0)
    assert (result["value"], result["n"], result["left_out"]) == (0.0, 4, 2)


@pytest.fixture(scope="module")
def coco_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mcot-coco") / "build"
    # targets up to 10 % of the image and a loose gold cap: the embedded sample's default build keeps only a
    # handful of small targets a person can name (issue 29), and the intervention tests need ten or more
    assert main(["build", "mcot", "--out", str(out), "--max-subject-area", "0.1", "--gold-margin", "0.5"]) == 0
    return out


def _target_box_shares(build: Path) -> dict[str, float]:
    """Each item's box around its targets as a share of the image (the zoom-oracle's one crop), by item id."""
    shares = {}
    for record in (i.record for i in open_mcot_dataset(build).items):
        boxes = [t["bbox"] for t in record["targets"]]
        width = max(b[0] + b[2] for b in boxes) - min(b[0] for b in boxes)
        height = max(b[1] + b[3] for b in boxes) - min(b[1] for b in boxes)
        shares[record["id"]] = width * height / (record["width"] * record["height"])
    return shares


def run_and_score(build: Path, model: str, folder: Path, *flags: str) -> dict:
    dataset = open_mcot_dataset(build)
    with ReferenceServer(dataset, model, family="mcot") as server:
        assert main(["run", "mcot", "--dataset", str(build), "--model", model, "--base-url", server.base_url,
                     "--out", str(folder / "run"), "--no-progress", *flags]) == 0
    assert main(["score", "mcot", "--dataset", str(build), "--predictions", str(folder / "run" / "predictions.jsonl"),
                 "--from-run", "--out", str(folder / "score"), "--bootstrap", "100"]) == 0
    metrics = json.loads((folder / "score" / "metrics.json").read_text())
    assert schema_errors("mcot_metrics", metrics) == []
    return metrics


@pytest.mark.parametrize("flags", [(), ("--tool-protocol", "functions", "--coords", "normalized",
                                        "--continuation", "user-turn")])
def test_reference_models_bracket_the_interventions(coco_build: Path, tmp_path: Path, flags: tuple[str, ...]) -> None:
    n = len(open_mcot_dataset(coco_build).items)
    assert n >= 10
    shares = list(_target_box_shares(coco_build).values())
    oracle = run_and_score(coco_build, "zoom-oracle", tmp_path / "oracle", *flags)["overall"]
    follower = run_and_score(coco_build, "text-follower", tmp_path / "follower", *flags)["overall"]
    blind = run_and_score(coco_build, "blind", tmp_path / "blind", *flags)["overall"]
    # zoom-oracle: right from the real crops, wrong from noise: every item discordant, b = n, c = 0,
    # so ATE_visual = -1 and p = 2 * (1/2)^n; its text is ignored: ATE_text 0, p 1
    assert oracle["accuracy_trace"] == 1.0 and oracle["accuracy_replay_none"] == 1.0
    assert oracle["ATE_visual"] == -1.0 and oracle["ate"]["visual"]["b"] == n
    assert oracle["ate"]["visual"]["p_mcnemar"] == 2 * 0.5 ** n
    assert oracle["ATE_text"] == 0.0 and oracle["ate"]["text"]["p_mcnemar"] == 1.0
    # its one crop is the box around the targets (outward rounding aside): a zoom unless it covers more than
    # the judge's max crop share (0.6 of the image: a far-apart relation pair), which earns no sufficiency
    # and no target hit (evaluators/mcot/judge.py); its answers are right, so reliability = sufficiency
    zooms = sum(share <= 0.6 for share in shares) / n
    assert oracle["sufficiency"] == pytest.approx(zooms) and oracle["reliability"] == pytest.approx(zooms)
    assert oracle["tool_call_count"] == 1.0
    assert oracle["grounding_iou"] >= 0.9 and oracle["target_hit_rate"] == pytest.approx(zooms)
    # text-follower: its answer follows its own (now wrong) words: ATE_text = -1 on the items whose text
    # changed and whose replays both answered (m of them, p = 2 * (1/2)^m); a replay whose words name no
    # option ("<answer>none</answer>") is unparsed and left out, never a change; noise crops change
    # nothing: ATE_visual 0, p 1
    m = follower["ate"]["text"]["n"]
    assert m == n - follower["counts"]["text_unchanged"] - follower["ate"]["text"]["left_out"] and m >= 10
    assert follower["ATE_text"] == -1.0 and follower["ate"]["text"]["p_mcnemar"] == 2 * 0.5 ** m
    assert follower["ATE_visual"] == 0.0 and follower["ate"]["visual"]["p_mcnemar"] == 1.0
    # blind: no tool call anywhere: left out of the intervention and judge metrics, and counted
    assert blind["ATE_text"] is None and blind["ATE_visual"] is None and blind["reliability"] is None
    assert blind["counts"]["no_tool_call"] == n and blind["tool_call_count"] == 0.0
    # the oracle's one crop is the box around the item's targets (outward rounding aside): its area share, averaged
    assert oracle["crop_region_size"] == pytest.approx(sum(shares) / n, rel=0.1)


def test_score_outputs_are_deterministic_and_plotted(coco_build: Path, tmp_path: Path) -> None:
    first = run_and_score(coco_build, "zoom-oracle", tmp_path / "a")
    again = tmp_path / "a" / "score2"
    assert main(["score", "mcot", "--dataset", str(coco_build), "--predictions",
                 str(tmp_path / "a" / "run" / "predictions.jsonl"), "--from-run", "--out", str(again),
                 "--bootstrap", "100"]) == 0
    for name in ("metrics.json", "items.jsonl", "report.md", "metrics.png", "tool_call_count.png",
                 "crop_region_size.png"):
        assert (again / name).read_bytes() == (tmp_path / "a" / "score" / name).read_bytes()
    assert schema_errors("mcot_metrics", first) == []
    report = (again / "report.md").read_text()
    assert "McNemar p (exact)" in report and "ATE_visual" in report and first["provenance"]["family"] == "mcot"
    items = [json.loads(line) for line in (again / "items.jsonl").read_text().splitlines()]
    shares = _target_box_shares(coco_build)  # a crop over 0.6 of the image is no zoom and covers nothing
    assert all((line["judge"]["coverage"] >= 0.5) == (shares[line["id"]] <= 0.6) for line in items)


def test_report_compares_models_paired_by_item(coco_build: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    n = len(open_mcot_dataset(coco_build).items)
    run_and_score(coco_build, "zoom-oracle", tmp_path / "oracle")
    blind = run_and_score(coco_build, "blind", tmp_path / "blind")
    capsys.readouterr()
    assert main(["report", str(tmp_path / "oracle" / "score"), str(tmp_path / "blind" / "score"), "--out",
                 str(tmp_path / "cmp"), "--bootstrap", "100"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0].startswith("compared 2 models (MCoT interventions); wrote ") and "report.md" in shown[0]
    assert shown[1].startswith("  zoom-oracle") and ": accuracy_trace 1.000, " in shown[1]
    assert shown[2].startswith("  blind") and ": accuracy_trace " in shown[2]
    assert shown[3] == f"explorer: {tmp_path / 'cmp' / 'index.html'}" and len(shown) == 4
    pair = json.loads((tmp_path / "cmp" / "comparison.json").read_text())["pairs"][0]
    # the oracle is right everywhere, blind on k items: a - b = (n - k) / n, every other item discordant one way
    k = round(blind["overall"]["accuracy_trace"] * n)
    assert (pair["items"], pair["right_only_a"], pair["right_only_b"]) == (n, n - k, 0)
    assert pair["accuracy_trace_diff"] == pytest.approx((n - k) / n)
    assert pair["p_mcnemar"] == pytest.approx(2 * 0.5 ** (n - k))
    assert "McNemar p" in (tmp_path / "cmp" / "report.md").read_text() and (tmp_path / "cmp" / "compare.png").is_file()
