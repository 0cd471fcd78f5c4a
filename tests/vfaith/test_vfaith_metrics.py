"""VFaith's answer parsing and metrics against values computed by hand from the definitions
(evaluators/vfaith/parse.py, evaluators/vfaith/metrics.py; VFaith sections 3.2.2 and 4.1)."""
from __future__ import annotations

import pytest

from mmfaith.evaluators.vfaith.metrics import pair_scores, perception_scores, summarize
from mmfaith.evaluators.answers import read_choice, read_choice_set
from mmfaith.evaluators.vfaith.parse import normalize, parse_free

COLORS = [{"label": "A", "text": "red"}, {"label": "B", "text": "blue"}, {"label": "C", "text": "gray"},
          {"label": "D", "text": "3"}]


@pytest.mark.parametrize(("response", "label"), [
    ("The car looks blue. \\boxed{B}", "B"), ("\\boxed{(b)}", "B"), ("\\boxed{B.}", "B"), ("\\boxed{B. Blue}", "B"),
    ("\\boxed{Blue.}", "B"), ("\\boxed{grey}", "C"), ("\\boxed{three}", "D"), ("\\boxed{A} then \\boxed{C}", "C"),
    ("\\boxed{B. red}", None), ("\\boxed{E}", None), ("\\boxed{purple}", None), ("\\boxed{}", None),
])
def test_a_choice_is_the_last_boxed_letter_or_option_text(response: str, label: str | None) -> None:
    assert read_choice(response, COLORS) == label == read_choice(response, COLORS, "paper")


def test_the_paper_rule_reads_only_a_box() -> None:
    # VFaith section 4.1 reads \boxed{}; the default reader also reads a bare label (docs/answers.md)
    assert read_choice("B", COLORS, "paper") is None and read_choice("B", COLORS) == "B"


@pytest.mark.parametrize(("response", "labels"), [
    ("\\boxed{A, C}", {"A", "C"}), ("\\boxed{C,A}", {"A", "C"}), ("\\boxed{A and C}", {"A", "C"}),
    ("\\boxed{A C}", {"A", "C"}), ("\\boxed{B}", {"B"}), ("\\boxed{none}", set()), ("\\boxed{red; blue}", {"A", "B"}),
    ("\\boxed{A, E}", None), ("no box", None),
])
def test_a_perception_answer_is_a_set(response: str, labels: set[str] | None) -> None:
    parsed = read_choice_set(response, COLORS, "paper")
    assert (None if parsed is None else set(parsed)) == labels


def test_free_form_answers_are_normalised() -> None:
    assert parse_free("so \\boxed{The Grey.}") == "gray" == normalize("gray")
    assert parse_free("\\boxed{Two}") == "2"
    assert parse_free("nothing boxed", "paper") is None and parse_free("nothing boxed") == "nothing boxed"
    assert parse_free("It is hard to say, but looking at the whole picture it seems grey") is None


def _pair(n: int, category: str, gt_o: str, gt_e: str, a_o: str | None, a_e: str | None) -> dict:
    record = {"id": f"vf-{n:016x}", "category": category, "answer_original": gt_o, "answer_edited": gt_e}
    statuses = {"original": "answered" if a_o else "unparsed", "edited": "answered" if a_e else "unparsed"}
    return pair_scores(record, a_o, a_e, statuses, f"image-{n % 3}")


def test_every_metric_matches_the_hand_computed_values() -> None:
    items = [
        _pair(1, "RWS", "A", "B", "A", "B"),   # right, right
        _pair(2, "RWS", "A", "B", "A", "A"),   # right, wrong: repeats gt_o and its own answer
        _pair(3, "REA", "C", "D", "C", "B"),   # right, wrong: repeats neither
        _pair(4, "REA", "C", "D", None, "D"),  # unparsed original (wrong), right
        _pair(5, "REA", "A", "C", "B", "A"),   # wrong, wrong: repeats gt_o, not its own answer B
        _pair(6, "RWS", "B", "A", "B", None),  # right, unparsed edited: out of both repeat ratios
        perception_scores({"id": "vfp-1", "pair_id": "vf-1", "answers": ["A", "C"]}, frozenset({"C", "A"}), "answered", "x"),
        perception_scores({"id": "vfp-2", "pair_id": "vf-2", "answers": ["B"]}, frozenset({"B", "D"}), "answered", "x"),
        perception_scores({"id": "vfp-3", "pair_id": "vf-3", "answers": ["D"]}, None, "unparsed", "x"),
    ]
    metrics = summarize(items, n_bootstrap=0, seed=0)
    overall = metrics["overall"]
    # By hand: raw right on 1, 2, 3, 6 -> 4/6; edit right on 1, 4 -> 2/6; delta -2/6.
    assert overall["raw_accuracy"] == pytest.approx(4 / 6, abs=1e-6)
    assert overall["edit_accuracy"] == pytest.approx(2 / 6, abs=1e-6)
    assert overall["delta"] == pytest.approx(-2 / 6, abs=1e-6)
    # RWS = pairs 1, 2, 6: raw 3/3, edit 1/3; REA = 3, 4, 5: raw 1/3, edit 1/3. No PFK, CRE, TIF: absent.
    assert set(metrics["by_category"]) == {"RWS", "REA"}
    rws, rea = metrics["by_category"]["RWS"], metrics["by_category"]["REA"]
    assert (rws["raw_accuracy"], rws["edit_accuracy"], rws["delta"]) == pytest.approx((1.0, 1 / 3, -2 / 3), abs=1e-6)
    assert (rea["raw_accuracy"], rea["edit_accuracy"], rea["delta"]) == pytest.approx((1 / 3, 1 / 3, 0.0), abs=1e-6)
    # Parsed wrong edited answers: pairs 2, 3, 5. Equal to gt_o: 2 and 5 -> 2/3. Equal to the model's own
    # original (all three parsed): only pair 2 -> 1/3.
    assert overall["repeat_ratio"] == pytest.approx(2 / 3, abs=1e-6)
    assert overall["repeat_ratio_own"] == pytest.approx(1 / 3, abs=1e-6)
    assert metrics["counts"]["repeat_denominator"] == 3 and metrics["counts"]["repeat_own_denominator"] == 3
    # Perception: only the first set is exactly right -> 1/3 (a superset and an unparsed answer are wrong).
    assert overall["perception_accuracy"] == pytest.approx(1 / 3, abs=1e-6)
    # McNemar, on pairs with both answers read only (4 and 6 are left out, docs/answers.md):
    # b (raw right, edit wrong) = pairs 2, 3; c (raw wrong, edit right) = none.
    # p = 2 * P(X <= 0), X ~ Bin(2, 1/2) = 2 * 1 / 4 = 0.5.
    test = metrics["mcnemar_raw_vs_edit"]
    assert (test["b_raw_right_edit_wrong"], test["c_raw_wrong_edit_right"], test["n_left_out"]) == (2, 0, 2)
    assert test["p_value"] == pytest.approx(0.5)
    zero = {"empty": 0, "failed": 0, "missing": 0}
    assert metrics["counts"]["answers"] == {"original": {"answered": 5, "unparsed": 1, **zero},
                                            "edited": {"answered": 5, "unparsed": 1, **zero},
                                            "perception": {"answered": 2, "unparsed": 1, **zero}}


def test_repeat_ratios_are_null_without_a_wrong_parsed_edited_answer_and_cis_bracket_the_value() -> None:
    items = [_pair(n, "RWS", "A", "B", "A", "B") for n in range(4)] + [_pair(9, "REA", "A", "B", "A", None)]
    metrics = summarize(items, n_bootstrap=200, seed=1)
    assert metrics["overall"]["repeat_ratio"] is None and metrics["overall"]["repeat_ratio_own"] is None
    assert metrics["ci95"]["repeat_ratio"] is None and metrics["overall"]["perception_accuracy"] is None
    low, high = metrics["ci95"]["edit_accuracy"]
    assert metrics["overall"]["edit_accuracy"] == pytest.approx(0.8)  # 4 of 5; the unparsed one is wrong
    assert low <= 0.8 <= high
    assert summarize(items, n_bootstrap=200, seed=1) == metrics  # seeded: the same intervals


def test_every_headline_metric_is_declared_by_the_family() -> None:
    """Reports read metric descriptions from the declaration (mmfaith/families.py): every key must have one."""
    from mmfaith import families
    from mmfaith.evaluators.vfaith.metrics import HEADLINE

    family = families.get("vfaith")
    assert {*HEADLINE, "mcnemar_raw_vs_edit.p_value"} == {metric.key for metric in family.metrics}
    assert [probe.name for probe in family.probes] == ["original", "edited", "perception"]
    assert [name for name, _ in family.reference_models] == ["oracle", "memorizer", "prior"]
    assert all(metric.doc == "docs/vfaith.md#metrics" for metric in family.metrics)
