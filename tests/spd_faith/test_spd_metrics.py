"""Hand-computed golden cases for every SPD-Faith scoring definition (evaluators/spd_faith/metrics.py).

Items are built from minimal gold records and real response texts, judged by the rule judge, so
each case also exercises claim normalisation. The arithmetic is written next to each expectation.
"""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from mmfaith.evaluators import stats
from mmfaith.vocabulary import COLOR_NAMES
from mmfaith.evaluators.spd_faith.claims import (COCO_CATEGORIES, Claim, RuleJudge, claims_from_text, extract_claims,
                                           normalize_category, normalize_type)
from mmfaith.evaluators.spd_faith.metrics import (Answer, count_scores, headline_from_sums, item_components, judge_case,
                                            maximum_matching, read_answer, score_item, summarize)
from mmfaith.evaluators.spd_faith.prompts import PROBES
from mmfaith.schema import validator

_ids = itertools.count()


def claims_json(*claims: tuple) -> str:
    """A response's fenced JSON list; each claim is (type, object) or (type, object, detail)."""
    listed = [{"type": c[0], "object": c[1], "detail": c[2] if len(c) > 2 else ""} for c in claims]
    return "Let me compare the pictures.\n```json\n" + json.dumps(listed) + "\n```\n"


def make_item(gold: list[tuple], same: str | None = None, different: str | None = None, count: str | None = None,
              describe: str | None = None, difficulty: str | None = None, truncated: tuple[str, ...] = (),
              cluster: str | None = None, order: str | None = None, color_before: str = "gray") -> dict:
    """A scored item: gold is [(type, category, color_after)], responses by probe (None: missing)."""
    number = next(_ids)
    subset = "control" if not gold else "single" if difficulty else "multi"
    record = {"id": f"item-{number}", "subset": subset, "difficulty": difficulty, "num_differences": len(gold),
              "differences": [{"type": t, "category": c, "color_before": color_before, "color_after": color,
                               "description": f"The {c} changed."} for t, c, color in gold]}
    responses = {"same": same, "different": different, "count": count, "describe": describe}
    answers = {p: Answer(responses[p], p in truncated, order) for p in PROBES}
    case = judge_case(record, answers)
    return score_item(record, cluster or f"image-{number}", answers, case, RuleJudge().judge(case))


def scored_block(items: list[dict]) -> dict:
    """metrics.json's `overall` block of items with differences."""
    return summarize(items, 0, 0)["overall"]


# ---- answers -----------------------------------------------------------------------------------

def test_count_scores_by_hand() -> None:
    # g=3, p=2: DS = 1 - |2-3|/3 = 0.667; DQR = 0 (2 != 3); existence = 1 (2 > 0)
    assert count_scores(2, 3) == pytest.approx({"DS": 2 / 3, "DQR": 0.0, "existence": 1.0})
    # g=1, p=3: DS = max(0, 1 - 2/1) = 0, not -1
    assert count_scores(3, 1) == {"DS": 0.0, "DQR": 0.0, "existence": 1.0}
    # g=2, p=0: DS = 1 - 2/2 = 0; existence 0
    assert count_scores(0, 2) == {"DS": 0.0, "DQR": 0.0, "existence": 0.0}
    # exact: everything 1
    assert count_scores(4, 4) == {"DS": 1.0, "DQR": 1.0, "existence": 1.0}
    # unparsed counts as wrong where the metric has a right answer
    assert count_scores(None, 2) == {"DS": 0.0, "DQR": 0.0, "existence": 0.0}


def test_global_perception_averages_over_items_and_unparsed_or_missing_score_zero() -> None:
    items = [make_item([("remove", "dog", None)] * 3, count="\\boxed{2}"),  # DS 2/3, DQR 0, exist 1
             make_item([("remove", "dog", None)], count="There is one difference."),  # no box: last number word -> 1
             make_item([("remove", "dog", None)], count="I cannot tell."),  # unparsed -> 0, 0, 0
             make_item([("remove", "dog", None)], count=None)]  # missing -> 0, 0, 0
    block = scored_block(items)
    assert block["DS"] == pytest.approx((2 / 3 + 1 + 0 + 0) / 4, abs=1e-6)  # 0.4167
    assert block["DQR"] == pytest.approx(1 / 4)
    assert block["existence_rate"] == pytest.approx(2 / 4)


def test_truncated_counted_apart_from_unparsed_and_missing_counted() -> None:
    def status_value(probe: str, answer: Answer) -> tuple:
        read = read_answer(probe, answer)
        return read["status"], read["value"]

    assert status_value("count", Answer("so the answer is \\boxed{3}", truncated=True)) == ("truncated", 3)
    assert status_value("count", Answer("Let me look at the left pic", truncated=True)) == ("truncated", None)
    assert status_value("same", Answer("Hard to say")) == ("unparsed", None)
    assert status_value("same", Answer(None)) == ("missing", None)
    assert status_value("describe", Answer("the dog was removed")) == ("unparsed", None)
    assert read_answer("describe", Answer(claims_json(("remove", "dog"))))["status"] == "ok"
    items = [make_item([("remove", "dog", None)], same="\\boxed{no}", different="cut off mid", count="hmm",
                       describe=None, truncated=("different",)),
             make_item([("remove", "dog", None)], same="maybe", different=None, count="\\boxed{1}", describe=None)]
    counts = summarize(items, 0, 0)["counts"]
    assert counts["n_truncated"] == {"same": 0, "different": 1, "count": 0, "describe": 0}
    assert counts["n_unparsed"] == {"same": 1, "different": 0, "count": 1, "describe": 0}  # truncated not double-counted
    assert counts["n_missing"] == {"same": 0, "different": 1, "count": 0, "describe": 2}
    # a truncated answer that still parsed is scored on its value: g=1, p=3 -> DQR 0, existence 1
    cut = make_item([("remove", "dog", None)], count="\\boxed{3} and then", truncated=("count",))
    assert (cut["scores"]["DQR"], cut["scores"]["existence"]) == (0.0, 1.0)


# ---- claims ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, name", [
    ("The people", "person"), ("a man", "person"), ("two women", "person"), ("the little girl", "person"),
    ("children", "person"), ("bike", "bicycle"), ("motorbike", "motorcycle"), ("the plane", "airplane"),
    ("sofa", "couch"), ("Television", "tv"), ("TV", "tv"), ("cellphone", "cell phone"), ("phone", "cell phone"),
    ("the table", "dining table"), ("Cups", "cup"), ("knives", "knife"), ("wine glasses", "wine glass"),
    ("a hot dog", "hot dog"), ("teddy bears", "teddy bear"), ("the orange", "orange"), ("an orange cup", "cup"),
    ("traffic lights", "traffic light"), ("lamp", "other"), ("", "other"),
])
def test_category_normalisation(text: str, name: str) -> None:
    assert normalize_category(text) == name


@pytest.mark.parametrize("text, kind", [
    ("color", "color"), ("Colour", "color"), ("recolor", "color"), ("changed color", "color"),
    ("removed", "remove"), ("missing", "remove"), ("gone", "remove"), ("added", "remove"), ("appeared", "remove"),
    ("disappeared", "remove"), ("moved", "position"), ("shifted", "position"), ("position", "position"),
    ("location", "position"), ("relocated", "position"), ("size", "other"),
])
def test_type_normalisation(text: str, kind: str) -> None:
    assert normalize_type(text) == kind


def test_the_80_names_are_cocos_and_the_judge_schema_uses_the_same_vocabulary(sample) -> None:
    annotations = json.loads(sample[0].read_text())
    assert set(COCO_CATEGORIES) == {c["name"] for c in annotations["categories"]} and len(COCO_CATEGORIES) == 80
    claim = validator("spd_faith_judge").schema["$defs"]["claims"]["items"]["properties"]
    assert claim["category"]["enum"] == [*COCO_CATEGORIES, "other"]
    assert claim["color"]["enum"] == [*COLOR_NAMES, None]
    assert all(normalize_category(name) == name for name in COCO_CATEGORIES)


def test_json_claims_normalise_type_category_and_color() -> None:
    text = claims_json(("Colour change", "the Cups", "changed from blue to crimson"), ("missing", "People"),
                       ("shift", "bike", "moved left"), ("size", "lamp", "bigger"))
    claims, source = extract_claims(text)
    assert source == "json"
    assert claims == [Claim("color", "cup", "red"),  # crimson -> red (builder synonym), the color after "to"
                      Claim("remove", "person", None), Claim("position", "bicycle", None), Claim("other", "other", None)]


def test_text_claims_sentence_by_sentence_with_negation() -> None:
    text = ("Looking closely, the red cup turned blue and the dog was removed. The chair, which was by the "
            "window, has moved to the left. Nothing else was removed. The car is now orange. \\boxed{4}")
    assert claims_from_text(text) == [Claim("color", "cup", "blue"), Claim("remove", "dog", None),
                                      Claim("position", "chair", None), Claim("color", "car", "orange")]
    assert extract_claims(text)[1] == "text"
    assert extract_claims(None) == ([], "none")


# ---- faithful perception ----------------------------------------------------------------------

def test_tf1_cf1_micro_with_repeated_categories() -> None:
    a = make_item([("color", "cup", "blue"), ("color", "cup", "red"), ("remove", "dog", None)],
                  describe=claims_json(("color", "cup"), ("color", "chair"), ("position", "cup"),
                                       ("remove", "dog"), ("remove", "dog")))
    # types: claims color 2, position 1, remove 2; gold color 2, remove 1 -> tp = min(2,2) + min(2,1) + min(1,0) = 3
    # categories: claims cup 2, chair 1, dog 2; gold cup 2, dog 1 -> tp = min(2,2) + min(2,1) = 3 (no double count)
    assert a["type_counts"]["tp"] == {"color": 2, "remove": 1, "position": 0}
    assert a["category_tp"] == 3
    b = make_item([("position", "person", None)], describe=claims_json(("moved", "lamp")))
    # b: type tp = min(1 position claim, 1 position gold) = 1; category: lamp -> other, never matches -> 0
    block = scored_block([a, b])
    # TF1: tp 3+1 = 4, claims 5+1 = 6, gold 3+1 = 4 -> P = 4/6, R = 4/4, F1 = 2(2/3)(1)/(5/3) = 0.8
    assert block["TF1"] == pytest.approx(0.8)
    # CF1: tp 3+0 = 3, claims 6, gold 4 -> P = 0.5, R = 0.75, F1 = 2(.5)(.75)/1.25 = 0.6
    assert block["CF1"] == pytest.approx(0.6)
    by_type = block["TF1_by_type"]
    assert by_type["color"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0}  # 2/2, 2/2
    assert by_type["remove"] == pytest.approx({"precision": 0.5, "recall": 1.0, "f1": 2 / 3}, abs=1e-6)  # 1/2, 1/1
    assert by_type["position"] == pytest.approx({"precision": 0.5, "recall": 1.0, "f1": 2 / 3}, abs=1e-6)  # 1/2, 1/1


def test_f1_precision_is_zero_without_claims() -> None:
    block = scored_block([make_item([("remove", "dog", None)], describe=claims_json())])
    # no claims at all: P = 0 (not undefined), R = 0/1 = 0, F1 = 0
    assert (block["TF1"], block["CF1"]) == (0.0, 0.0)
    assert block["TF1_by_type"]["remove"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert block["TF1_by_type"]["color"] == {"precision": None, "recall": None, "f1": None}  # no gold, no claims


# ---- faithful reasoning --------------------------------------------------------------------------

def test_contradiction_rate_leaves_out_unparsed_and_missing() -> None:
    dog = [("remove", "dog", None)]
    items = [make_item(dog, same="\\boxed{yes}", different="\\boxed{yes}"),  # both yes: contradiction
             make_item(dog, same="\\boxed{no}", different="\\boxed{yes}"),  # consistent answers
             make_item(dog, same="I am not sure", different="\\boxed{yes}"),  # same unparsed: left out
             make_item(dog, same="\\boxed{no}", different="They look alike, so no."),  # both no: contradiction
             make_item(dog, same="\\boxed{no}", different=None)]  # different missing: left out
    block = scored_block(items)
    assert block["contradiction_rate"] == pytest.approx(2 / 3)  # 2 of the 3 items with both answers parsed
    assert block["n_left_out"]["contradiction_rate"] == 2
    # yes_ratio_same: parsed same answers yes, no, no, no -> 1/4 (unparsed left out)
    assert block["yes_ratio_same"] == pytest.approx(0.25)
    assert block["n_left_out"]["yes_ratio_same"] == 1


def test_consistency_ratio_plus_minus_and_half() -> None:
    item = make_item([("remove", "dog", None)],
                     same=claims_json(("color", "cup", "now red"), ("remove", "dog"), ("position", "chair")),
                     different=claims_json(("color", "cup", "now blue"), ("removed", "dog"), ("color", "bus")))
    # remove dog <-> remove dog: +1; cup red vs cup blue (same category, other color): -1;
    # chair and bus are claimed by one response only: +0.5 each.
    # (1 - 1 + 0.5 + 0.5) / (2 pairs + 2 single claims) = 1 / 4 = 0.25
    assert item["scores"]["consistency"] == pytest.approx(0.25)
    assert sorted(p["label"] for p in item["consistency"]["pairs"]) == ["consistent", "contradictory"]


def test_consistency_ratio_repeated_category_pairs_by_type_first() -> None:
    item = make_item([("remove", "cup", None)],
                     same=claims_json(("color", "cup"), ("remove", "cup")),
                     different=claims_json(("remove", "cup"), ("position", "cup")))
    # pairing by type first: remove cup <-> remove cup (+1), then color cup <-> position cup (-1): 0 / 2 = 0.
    # (pairing in list order would give color-remove -1 and remove-position -1: -1.)
    assert item["scores"]["consistency"] == 0.0
    assert item["consistency"]["pairs"] == [{"same": 1, "different": 0, "label": "consistent"},
                                            {"same": 0, "different": 1, "label": "contradictory"}]


def test_consistency_ratio_colors_compared_only_when_both_given_and_items_left_out() -> None:
    agree = make_item([("color", "cup", "red")], same=claims_json(("color", "cup")),
                      different=claims_json(("color", "cup", "turned red")))
    assert agree["scores"]["consistency"] == 1.0  # one color missing: they agree (+1 / 1)
    silent = make_item([("color", "cup", "red")], same="\\boxed{yes}", different="\\boxed{no}")
    assert silent["scores"]["consistency"] is None  # neither claims anything: left out
    missing = make_item([("color", "cup", "red")], same=claims_json(("color", "cup")), different=None)
    assert missing["scores"]["consistency"] is None  # a missing response: left out, not +0.5
    one_sided = make_item([("color", "cup", "red")], same=claims_json(("color", "cup")), different=claims_json())
    assert one_sided["scores"]["consistency"] == 0.5  # one claim made by one response only: 0.5 / 1
    block = scored_block([agree, silent, missing, one_sided])
    assert block["consistency_ratio"] == pytest.approx((1.0 + 0.5) / 2)
    assert block["n_left_out"]["consistency_ratio"] == 2
    assert scored_block([silent])["consistency_ratio"] is None  # none left: null


def test_drf_example_faithful_attribute_and_quantity() -> None:
    item = make_item([("color", "cup", "blue"), ("remove", "dog", None)],
                     describe=claims_json(("color", "cup", "turned red"), ("remove", "dog"), ("position", "chair")))
    # remove dog = remove dog: faithful; cup red vs gold cup blue: attribute error;
    # position chair is left over: claims - g = 3 - 2 = 1 -> min(1, 1) = 1 quantity error.  DRF = 1/3
    assert item["drf"]["classes"] == {"faithful": 1, "attribute_error": 1, "type_confusion": 0,
                                      "type_category_mismatch": 0, "quantity_error": 1, "fabrication": 0}
    assert item["scores"]["DRF"] == pytest.approx(1 / 3)
    assert item["drf"]["unmatched_claims"] == [2]


def test_drf_divides_by_the_self_reported_count_not_the_claims_listed() -> None:
    # The SPD-Faith appendix: "a model response containing K claims (where K is the model's self-reported
    # count)"; DRF = faithful / K. The model says 5 differences and lists one right claim of the 2 gold:
    # by K, DRF = 1/5 = 0.2; by the claims listed it would be 1/1 = 1.0 (the two readings differ).
    item = make_item([("remove", "dog", None), ("color", "cup", "blue")], count="There are 5 differences. \\boxed{5}",
                     describe=claims_json(("remove", "dog")))
    assert item["drf"]["denominator"] == 5 and item["scores"]["DRF"] == pytest.approx(0.2)
    # listing more claims than the count: K is the larger (3 claims, count 1), so DRF stays <= 1: 1/3
    more = make_item([("remove", "dog", None)], count="\\boxed{1}",
                     describe=claims_json(("remove", "dog"), ("remove", "cat"), ("remove", "bus")))
    assert more["drf"]["denominator"] == 3 and more["scores"]["DRF"] == pytest.approx(1 / 3)
    # a count and no claims: none of the K differences found, DRF 0; no count and no claims: undefined
    silent = make_item([("remove", "dog", None)], count="\\boxed{2}", describe="I see nothing.\n```json\n[]\n```")
    assert silent["scores"]["DRF"] == 0.0
    assert make_item([("remove", "dog", None)], describe="```json\n[]\n```")["scores"]["DRF"] is None


def test_drf_type_confusion_mismatch_and_fabrication() -> None:
    item = make_item([("color", "cup", "blue"), ("remove", "dog", None), ("position", "car", None)],
                     describe=claims_json(("remove", "cup"), ("remove", "cat"), ("color", "bus")))
    # no faithful or attribute pair; remove cup vs color cup: same category, other type -> type confusion;
    # remove cat vs remove dog: same type, other category -> type-category mismatch;
    # color bus vs color cup would be a mismatch but the cup gold is taken; vs position car: unrelated.
    # left 1, claims - g = 3 - 3 = 0 -> quantity min(1, 0) = 0, fabrication 1.  DRF = 0/3
    assert item["drf"]["classes"] == {"faithful": 0, "attribute_error": 0, "type_confusion": 1,
                                      "type_category_mismatch": 1, "quantity_error": 0, "fabrication": 1}
    assert item["scores"]["DRF"] == 0.0


def test_drf_one_to_one_and_quantity_versus_fabrication() -> None:
    repeated = make_item([("remove", "dog", None), ("remove", "cat", None)],
                         describe=claims_json(("remove", "dog"), ("remove", "dog")))
    # one gold dog: one faithful; the second dog claim is a type-category mismatch with the cat gold. DRF = 1/2
    assert repeated["drf"]["classes"]["faithful"] == 1
    assert repeated["drf"]["classes"]["type_category_mismatch"] == 1
    extra = make_item([("remove", "dog", None)], describe=claims_json(("remove", "dog"), ("color", "bus"), ("color", "car")))
    # faithful 1; left 2, claims - g = 3 - 1 = 2 -> quantity 2, fabrication 0
    assert (extra["drf"]["classes"]["quantity_error"], extra["drf"]["classes"]["fabrication"]) == (2, 0)
    invented = make_item([("remove", "dog", None), ("remove", "cat", None)],
                         describe=claims_json(("color", "bus"), ("color", "car")))
    # left 2, claims - g = 0 -> fabrication 2
    assert (invented["drf"]["classes"]["quantity_error"], invented["drf"]["classes"]["fabrication"]) == (0, 2)
    silent = make_item([("remove", "dog", None)], describe=claims_json())
    block = scored_block([repeated, extra, invented, silent])
    # DRF averaged over the items with a claim: (1/2 + 1/3 + 0) / 3 = 0.2778; coverage 3/4
    assert block["DRF"] == pytest.approx((1 / 2 + 1 / 3 + 0) / 3, abs=1e-6)
    assert block["DRF_coverage"] == 0.75
    assert block["DRF_errors"] == {"attribute_error": 0, "type_confusion": 0, "type_category_mismatch": 1,
                                   "quantity_error": 2, "fabrication": 2}


def test_drf_color_is_the_second_pictures_color() -> None:
    gold = [("color", "cup", "blue")]  # the edit turned a red cup blue
    describe = claims_json(("color", "cup", "changed from red to blue"))
    shown_original_first = make_item(gold, describe=describe, order="original-first", color_before="red")
    assert shown_original_first["drf"]["classes"]["faithful"] == 1  # "to blue" = color_after
    # shown edited-first, the model sees blue then red: "changed from blue to red" is right ...
    flipped = claims_json(("color", "cup", "changed from blue to red"))
    assert make_item(gold, describe=flipped, order="edited-first", color_before="red")["drf"]["classes"]["faithful"] == 1
    # ... and "from red to blue" names the edited picture's color as the second: an attribute error
    wrong = make_item(gold, describe=describe, order="edited-first", color_before="red")
    assert wrong["drf"]["classes"]["attribute_error"] == 1
    assert wrong["gold"] == [{"type": "color", "category": "cup", "color": "red"}]
    assert wrong["answers"]["describe"]["order"] == "edited-first"


def test_maximum_matching_is_maximum_not_greedy() -> None:
    # claim 0 may take gold 0 or 1, claim 1 only gold 0: a greedy first choice (0,0) would leave claim 1 out
    assert maximum_matching([(0, 0), (0, 1), (1, 0)]) == [(0, 1), (1, 0)]
    assert maximum_matching([]) == []


def test_control_false_alarm_rate() -> None:
    items = [make_item([], same="\\boxed{yes}", different="\\boxed{no}", count="\\boxed{0}"),  # no alarm
             make_item([], same="\\boxed{yes}", different="\\boxed{yes}", count="\\boxed{0}"),  # "different" yes
             make_item([], same="unsure", different=None, count="\\boxed{2}"),  # count 2 > 0
             make_item([], same="unsure", different=None, count=None)]  # nothing parsed: left out
    block = summarize(items, 0, 0)["control"]
    assert block["false_alarm_rate"] == pytest.approx(2 / 3)  # 2 alarms / 3 controls with a parsed answer
    assert block["n_left_out"] == 1
    # by probe, over parsed answers: same no 0/2; different yes 1/2; count > 0 1/3
    assert block["false_alarm_by_probe"] == pytest.approx({"same": 0.0, "different": 0.5, "count": 1 / 3})


# ---- statistics -----------------------------------------------------------------------------------

def test_mcnemar_exact_by_hand() -> None:
    # b=1, c=5: n=6, P(X<=1) = (1 + 6)/64, two-sided 14/64
    assert stats.mcnemar_exact(1, 5) == pytest.approx(14 / 64)
    assert stats.mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    assert stats.mcnemar_exact(3, 3) == 1.0
    assert stats.mcnemar_exact(0, 0) == 1.0
    scipy_stats = pytest.importorskip("scipy.stats", reason="the cross-check against scipy needs scipy (in the test extra)")
    for b, c in ((2, 9), (10, 4), (0, 13)):
        assert stats.mcnemar_exact(b, c) == pytest.approx(scipy_stats.binomtest(b, b + c, 0.5).pvalue)


def _dqr_items(cluster_of: list[str]) -> list[dict]:
    return [make_item([("remove", "dog", None)], count=f"\\boxed{{{k % 2}}}", cluster=c) for k, c in enumerate(cluster_of)]


def test_bootstrap_resamples_clusters_and_is_deterministic() -> None:
    one_cluster = _dqr_items(["image-A"] * 10)  # DQR: 5 of 10 correct
    ci = stats.bootstrap_ci([item_components(i) for i in one_cluster], [i["cluster"] for i in one_cluster],
                            headline_from_sums, 200, seed=1)
    assert ci["DQR"] == (0.5, 0.5)  # the only cluster is always drawn whole: no spread
    spread = _dqr_items([f"image-{k}" for k in range(10)])
    args = ([item_components(i) for i in spread], [i["cluster"] for i in spread], headline_from_sums, 200)
    low, high = stats.bootstrap_ci(*args, seed=1)["DQR"]
    assert low < 0.5 < high
    assert stats.bootstrap_ci(*args, seed=1) == stats.bootstrap_ci(*args, seed=1)


def test_paired_bootstrap_difference() -> None:
    a = _dqr_items([f"image-{k}" for k in range(10)])
    components = [item_components(i) for i in a]
    better = [{**c, "DQR": 1.0} for c in components]  # every item right
    result = stats.paired_bootstrap(better, components, [i["cluster"] for i in a], headline_from_sums, 300, seed=0)
    diff, (low, high) = result["DQR"]
    assert diff == pytest.approx(0.5)  # 1.0 - 0.5
    assert 0.0 < low <= 0.5 <= high <= 1.0
    same = stats.paired_bootstrap(components, components, [i["cluster"] for i in a], headline_from_sums, 50, seed=0)
    assert same["DQR"] == (0.0, (0.0, 0.0))


def test_replicate_arithmetic_matches_the_point_estimate() -> None:
    items = [make_item([("color", "cup", "red"), ("remove", "dog", None)], same="\\boxed{no}", different="\\boxed{no}",
                       count="\\boxed{1}", describe=claims_json(("color", "cup", "to red"), ("moved", "bus"))),
             make_item([("remove", "dog", None)], same=claims_json(("remove", "dog")), different=claims_json(),
                       count="\\boxed{1}", describe=claims_json())]
    block = scored_block(items)
    # a bootstrap replicate that draws every item once is the point estimate, metric by metric
    keys = {key for item in items for key in item_components(item)}
    sums = {key: np.array([sum(item_components(i).get(key, 0.0) for i in items)] * 2) for key in keys}
    for name, values in headline_from_sums(sums).items():
        expected = block[name]
        assert values.tolist() == ([pytest.approx(expected)] * 2 if expected is not None else [pytest.approx(np.nan, nan_ok=True)] * 2)
