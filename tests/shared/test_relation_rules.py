"""Held-out cases of the relation template's refusals (builders/coco_questions.relation_reason, issue 29).

Each case is an item a careful annotator rejected in the MCoT audit (benchmarks/audit/mcot.jsonl),
with a control from the same image that must still be asked. COCO 397 is not in the embedded
sample: three of its annotations are copied into relation_cases/ (no pixels are needed).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from mmfaith.builders.coco_questions import QuestionRules, relation_reason
from mmfaith.builders.coco_source import CocoSource, embedded_sample

CASES = Path(__file__).parent / "relation_cases"


def _instances(scene, *ann_ids):
    by_id = {inst.ann_id: inst for inst in scene.instances}
    return [by_id[ann_id] for ann_id in ann_ids]


def test_an_object_on_a_table_is_not_placed_left_or_right_of_it():
    # COCO 397: a fork (box x 595-640) on the table whose annotation (x 1-505) covers only what shows
    # between the pizza and the glasses; the boxes are 90 pixels apart, yet the fork lies on that table.
    scene = CocoSource(CASES / "instances_397.json", CASES).scene(397)
    fork, table, person = _instances(scene, 1889153, 1963869, 2151765)
    assert "surface" in relation_reason(fork, table, scene, QuestionRules())
    assert relation_reason(table, fork, scene, QuestionRules()) == relation_reason(fork, table, scene, QuestionRules())
    # control: the fork and the diner (box x 4-229) are 366 pixels apart and both placeable
    assert relation_reason(fork, person, scene, QuestionRules()) is None


@pytest.fixture(scope="module")
def kitchen():
    source = CocoSource(*embedded_sample())
    return source.scene(164)


def test_a_glimpse_of_an_oven_is_not_a_relation_object(kitchen):
    # COCO 164: the "oven" is a 47 x 34 pixel corner of a stovetop between a jug and a paper-towel roll
    # (0.52 % of 640 x 481); the fridge beside it is 97 x 138 (4.3 %), the microwave 53 x 30.
    oven, fridge, microwave, chair = _instances(kitchen, 1128244, 331750, 1119489, 384245)
    assert "glimpse" in relation_reason(oven, fridge, kitchen, QuestionRules())
    assert "glimpse" in relation_reason(microwave, oven, kitchen, QuestionRules())
    assert "glimpse" not in relation_reason(microwave, fridge, kitchen, QuestionRules())  # they touch
    # control: the microwave (small, but not a fitted appliance) and the chair (x 159-310) are asked
    assert relation_reason(microwave, chair, kitchen, QuestionRules()) is None

