"""Balanced gold by construction (issue 27 item 1): the shared definitions (mmfaith/gold_balance.py),
the generator's balance on the embedded sample, the cap in a real MCoT build, and CRM's masks that
must not keep a colour question's answer (item 6)."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from mmfaith.builders.coco_questions import CategoryContext, QuestionBalance, scene_questions
from mmfaith.builders.coco_source import CocoSource, embedded_sample
from mmfaith.builders.colors import object_color
from mmfaith.builders.crm.sources import coco_candidates
from mmfaith.builders.crm.variants import MaskSettings, evidence_regions, make_item
from mmfaith.builders.masks import apply_mask, mask_union
from mmfaith.cli import main
from mmfaith.gold_balance import GoldCap, GoldItem, gold_summary, prior_choices
from mmfaith.images import read_rgb, rgb_from_bytes
from tests.conftest import read_records

YES_NO = (("A", "yes"), ("B", "no"))


def _yn(answer: str, first: str = "yes") -> GoldItem:
    options = YES_NO if first == "yes" else (("A", "no"), ("B", "yes"))
    return GoldItem("existence", options, next(label for label, text in options if text == answer))


def test_prior_is_the_most_frequent_gold_of_the_other_items() -> None:
    # By hand: golds yes, yes, yes, no. Leaving item 0 out the others hold yes 2, no 1 -> "yes" (right);
    # items 1 and 2 likewise (right); item 3 (no) sees yes 3 -> "yes" (wrong). Prior 3/4.
    items = [_yn("yes"), _yn("yes", "no"), _yn("yes"), _yn("no")]
    assert prior_choices(items) == ["A", "B", "A", "A"]
    summary = gold_summary(items)["existence"]
    assert summary["prior"] == 0.75 and summary["majority"] == "yes" and summary["majority_share"] == 0.75
    # gold letters A, B, A, B: always-A 2/4; chance 1/2.
    assert summary["always_a"] == 0.5 and summary["chance"] == 0.5 and summary["gold_letters"] == {"A": 2, "B": 2}
    # A perfectly balanced binary template: leaving one out always tips the prior to the other answer.
    assert gold_summary([_yn("yes"), _yn("no")])["existence"]["prior"] == 0.0


def test_prior_falls_back_on_letters_then_the_first_letter() -> None:
    # Colour golds red, blue, purple, each at letter C, and no item's options hold another's gold text:
    # each answers the most frequent gold letter among the others, C (all right); alone, A.
    red = GoldItem("color", (("A", "green"), ("B", "white"), ("C", "red"), ("D", "pink")), "C")
    blue = GoldItem("color", (("A", "gray"), ("B", "black"), ("C", "blue"), ("D", "pink")), "C")
    odd = GoldItem("color", (("A", "gray"), ("B", "orange"), ("C", "purple"), ("D", "brown")), "C")
    assert prior_choices([red, blue, odd]) == ["C", "C", "C"]
    assert prior_choices([odd]) == ["A"]


def test_cap_allows_one_item_above_chance_plus_margin() -> None:
    # Binary template, margin 0.10: limit (0.5 + 0.1) * n + 1. n=1: 1 <= 1.6; n=2: 2 <= 2.2; n=3:
    # 3 > 2.8 -> the third "yes" in a row is refused; a "no" is then accepted (count 1).
    cap = GoldCap(0.10)
    assert cap.refusal(_yn("yes")) is None
    cap.add(_yn("yes"))
    assert cap.refusal(_yn("yes", "no")) is None
    cap.add(_yn("yes", "no"))
    reason = cap.refusal(_yn("yes"))
    assert reason is not None and "3 of 3 golds 'yes'" in reason and "chance 0.50 + margin 0.10" in reason
    assert cap.refusal(_yn("no")) is None
    with pytest.raises(ValueError):
        GoldCap(1.5)


def test_lettered_moves_the_gold_to_the_least_used_kept_letter() -> None:
    # By hand: kept existence golds at A, A, B (letters A 2, B 1). A candidate with its gold at A goes
    # to B, swapping with the distractor there; one already at B stays. Then A 2, B 2: a tie that
    # includes the candidate's own letter keeps it (A stays A); four-option items are tallied apart
    # (none kept: every letter ties, C stays C).
    cap = GoldCap(1.0, [_yn("yes"), _yn("no", "no"), _yn("no")])
    assert cap.lettered(_yn("yes")) == GoldItem("existence", (("A", "no"), ("B", "yes")), "B")
    assert cap.lettered(_yn("yes", "no")) == _yn("yes", "no")
    cap.add(_yn("yes", "no"))
    assert cap.lettered(_yn("yes")) == _yn("yes")
    four = GoldItem("existence", (("A", "x"), ("B", "y"), ("C", "z"), ("D", "w")), "C")
    assert cap.lettered(four) == four


def _assert_letters_stratified(gold: dict) -> None:
    """Each letter of a template is the gold of its share of the kept items within one (stratified)."""
    for template, summary in gold.items():
        letters = summary["gold_letters"]
        n_options = round(1 / summary["chance"])
        counts = [letters.get(letter, 0) for letter in "ABCDEFGHIJ"[:n_options]]
        assert max(counts) - min(counts) <= 1, (template, letters)


def test_cap_bounds_the_prior_even_when_no_gold_is_too_frequent() -> None:
    # Golds 1 x4, 5 x3, 9 x3, each window [g .. g+3] with the gold at A: "1" holds 4 of 10 (within
    # 0.35 * 10 + 1 = 4.5), but leaving any item out its own gold is still the most frequent text
    # among its options (1: three others; 5 and 9: two others, no other option a gold), so the
    # prior answers all 10 right: 10 > 4.5, refused by the prior rule.
    def count(gold: int) -> GoldItem:
        return GoldItem("count", tuple((letter, str(gold + i)) for i, letter in enumerate("ABCD")), "A")

    cap = GoldCap(0.10, [count(g) for g in (1, 5, 9, 1, 5, 9, 1, 5, 9)])
    reason = cap.refusal(count(1))
    assert reason is not None and reason.startswith("gold balance: the prior") and "10 of 10" in reason


@pytest.fixture(scope="module")
def balanced_questions() -> dict[str, list]:
    """Every question of every embedded-sample scene, asked with one balance and all kept."""
    source = CocoSource(*embedded_sample())
    context, balance = CategoryContext(source), QuestionBalance()
    by_template: dict[str, list] = {}
    for image_id in source.image_ids():
        scene = source.scene(image_id)
        annotated = {inst.category for inst in scene.instances}
        for question in scene_questions(scene, read_rgb(scene.path), 0, absent=context.plausible_absent(scene),
                                        balance=balance):
            balance.record(question)
            by_template.setdefault(question.template, []).append(question)
            if question.template == "existence" and question.facts["count"] == 0:
                # never a category annotated in the image, crowd included; the anchor is present
                assert question.facts["category"] not in annotated
                assert question.evidence[0].category == question.facts["anchor"] in annotated
    return by_template


def test_existence_asks_about_absent_categories_as_often_as_present_ones(balanced_questions) -> None:
    # One absent question per present one, as far as a scene has plausible absent categories left (linked to
    # one of its present ones) once those whose kind has small or crowd instances there, or is usually small
    # in the source, are dropped: each scene's absent questions are the smaller of the two numbers. (Before
    # the usually-small rule of issue 29 two scenes ran short, 65 yes and 63 no; now more do.)
    source = CocoSource(*embedded_sample())
    context = CategoryContext(source)
    by_scene: dict[int, list] = {}
    for question in balanced_questions["existence"]:
        by_scene.setdefault(int(question.key.split(":")[1]), []).append(question)
    for image_id, questions in by_scene.items():
        present = {q.facts["category"] for q in questions if q.facts["count"] > 0}
        absent = [q for q in questions if q.facts["count"] == 0]
        pool = [category for category, links in context.plausible_absent(source.scene(image_id)).items()
                if present & set(links)]
        assert len(absent) == min(len(present), len(pool)), image_id
    golds = Counter(q.answer_text for q in balanced_questions["existence"])
    assert 0 < golds["no"] <= golds["yes"]


def test_relation_and_letters_are_balanced(balanced_questions) -> None:
    golds = Counter(q.answer_text for q in balanced_questions["relation"])
    assert abs(golds["left"] - golds["right"]) <= 1
    for template, questions in balanced_questions.items():
        letters = Counter(q.answer for q in questions)
        n_options = len(questions[0].options)
        assert len(letters) == n_options and max(letters.values()) - min(letters.values()) <= 1, (template, letters)


def test_count_gold_sits_at_every_rank(balanced_questions) -> None:
    ranks = Counter(sorted(int(o.text) for o in q.options).index(int(q.answer_text))
                    for q in balanced_questions["count"])
    assert set(ranks) == {0, 1, 2, 3}  # smallest and largest included
    # the sample's counts are mostly 1, which can only be smallest or second: those two lead, within one
    # of each other (the least-used choice alternates them; an odd number of such questions cannot split
    # evenly: 24 and 25 since the unnameable targets of issue 29 are refused)
    assert abs(ranks[0] - ranks[1]) <= 1 and min(ranks[0], ranks[1]) >= ranks[2] >= ranks[3] > 0


def test_the_oneless_rule_keeps_count_minus_one() -> None:
    from mmfaith.builders.vfaith.offline import QUESTION_RULES

    source = CocoSource(*embedded_sample())
    for image_id in source.image_ids()[:12]:
        scene = source.scene(image_id)
        for question in scene_questions(scene, read_rgb(scene.path), 0, ("count",), QUESTION_RULES):
            assert str(question.facts["count"] - 1) in {o.text for o in question.options}


@pytest.fixture(scope="module")
def mcot_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mcot") / "build"
    assert main(["build", "mcot", "--out", str(out), "--no-progress"]) == 0
    return out


def test_mcot_build_caps_every_template_and_reports_its_gold(mcot_build: Path, capsys) -> None:
    records = read_records(mcot_build)
    gold = json.loads((mcot_build / "build.json").read_text())["gold"]
    items = [GoldItem.of_record(r["category"], r["options"], r["answer"]) for r in records]
    assert gold == gold_summary(items)
    _assert_capped(gold)
    _assert_letters_stratified(gold)
    rejected = read_records(mcot_build, "rejected.jsonl")
    assert rejected and {r["stage"] for r in rejected} == {"gold_balance"}
    assert all(r["reason"].startswith("gold balance: ") for r in rejected)


def _colour_candidates(count: int):
    source = CocoSource(*embedded_sample())
    found = [c for c in coco_candidates(source, 0, ("color",), per_image=1)]
    return found[:count]


def test_a_colour_question_is_refused_blur_and_mean_specific_masks() -> None:
    candidate = _colour_candidates(1)[0]
    for style in ("blur", "mean"):
        outcome = make_item(candidate, MaskSettings(styles=("black", style)))
        assert outcome.record is None and outcome.rejection["stage"] == "mask_style"
        assert style in outcome.rejection["reason"]
    # random masks alone leave the object in view: no style is refused then
    assert make_item(candidate, MaskSettings(styles=("blur",), modes=("random",))).record is not None


def test_no_kept_colour_item_leaks_its_answer_through_the_mask() -> None:
    # The pixel test: under every specific variant that is kept, the masked pixels are not named the
    # gold colour; a blur would have kept it (shown on the same objects) where the object's colour
    # is dominant over its box.
    kept = leaked = blur_keeps = 0
    for candidate in _colour_candidates(30):
        outcome = make_item(candidate, MaskSettings(styles=("black", "gray", "noise"), modes=("specific",)))
        if outcome.record is None:
            assert outcome.rejection["stage"] in ("mask_leak", "placement"), outcome.rejection
            leaked += outcome.rejection["stage"] == "mask_leak"
            continue
        kept += 1
        gold = candidate.facts["color"]
        for variant in outcome.record["variants"]:
            masked = rgb_from_bytes(outcome.files[variant["image"]], Path(variant["image"]))
            height, width = masked.shape[:2]
            regions = evidence_regions(candidate, outcome.record["regions"], "box", height, width)
            named = object_color(masked, mask_union(regions, height, width))
            assert not (named.dominant and named.name == gold), (candidate.key, variant["style"])
            original = read_rgb(candidate.image_path)
            blurred = apply_mask(original, regions, "blur")
            again = object_color(blurred, mask_union(regions, height, width))
            blur_keeps += again.dominant and again.name == gold
    assert kept > 0 and leaked > 0  # a black or gray box over a black or gray object is caught
    assert blur_keeps > 0  # and blur does keep some answers: the refusal above guards a real leak


def _assert_capped(gold: dict, margin: float = 0.10) -> None:
    for template, summary in gold.items():
        n, chance = summary["items"], summary["chance"]
        # the cap (one item of slack) holds for the majority gold and the prior's hits
        assert summary["majority_share"] * n <= (chance + margin) * n + 1 + 1e-9, template
        assert summary["prior"] * n <= (chance + margin) * n + 1 + 1e-9, template


def test_crm_build_asks_absent_objects_and_caps_every_template(tmp_path: Path, capsys) -> None:
    out = tmp_path / "crm"
    assert main(["build", "crm", "--out", str(out), "--no-progress", "--max-items", "24",
                 "--templates", "count,existence", "--per-image", "3"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("gold: count ")
    records = read_records(out)
    gold = json.loads((out / "build.json").read_text())["gold"]
    from mmfaith.builders.crm.build import gold_items

    assert gold == gold_summary(gold_items(records))
    assert gold["existence"]["gold"]["no"] > 0 and gold["existence"]["gold"]["yes"] > 0
    _assert_capped(gold)
    for record in records:
        if record["question_type"] == "existence" and record["facts"]["count"] == 0:
            assert record["answer"] == next(o["label"] for o in record["options"] if o["text"] == "no")
            assert record["regions"][0]["label"] == record["facts"]["anchor"]


def test_crm_build_letters_are_stratified_over_the_kept_items(tmp_path: Path) -> None:
    # The embedded sample's default CRM build rejects candidates after they are made (placement, the
    # cap); letters balanced over the candidates left would count unevenly over the kept items (10 since issue
    # 29's refusals: one count, nine existence, no colour since no vase is asked its colour).
    out = tmp_path / "crm"
    assert main(["build", "crm", "--out", str(out), "--no-progress"]) == 0
    records = read_records(out)
    from mmfaith.builders.crm.build import gold_items

    gold = json.loads((out / "build.json").read_text())["gold"]
    assert gold == gold_summary(gold_items(records)) and set(gold) == {r["question_type"] for r in records}
    assert gold["existence"]["items"] >= 8  # enough items for a letter balance to mean something
    _assert_letters_stratified(gold)
    for record in records:  # the gold text is still the fact the question asks about
        text = next(o["text"] for o in record["options"] if o["label"] == record["answer"])
        facts = record["facts"]
        expected = {"color": facts.get("color"), "count": str(facts.get("count")),
                    "existence": "yes" if facts.get("count") else "no"}[record["question_type"]]
        assert text == expected, record["id"]
