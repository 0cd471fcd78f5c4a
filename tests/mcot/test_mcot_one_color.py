"""Held-out cases of MCoT's one-colour rule (coco_questions `one_color_only`, issue 29's audit).

COCO 387 (a black smartphone whose screen shows a blue picture) was named blue and rejected by a
careful annotator in the MCoT and CRM audits; COCO 625's white frisbee was accepted. Both images are
cropped around the object into color_cases/ with its annotation shifted to the crop (COCO licences
NC and NC-SA; no other object of the image is needed).
"""
from __future__ import annotations

from pathlib import Path

from mmfaith.builders.coco_questions import QuestionRules, scene_questions, second_color
from mmfaith.builders.coco_source import CocoSource
from mmfaith.builders.mcot.coco import mcot_rules
from mmfaith.images import read_rgb

CASES = Path(__file__).parent / "color_cases"


def _colors(image_id: int, rules: QuestionRules) -> dict[int, str]:
    scene = CocoSource(CASES / f"instances_{image_id}.json", CASES).scene(image_id)
    questions = scene_questions(scene, read_rgb(scene.path), 0, ("color",), rules)
    return {question.evidence[0].ann_id: question.facts["color"] for question in questions}


def test_a_phone_whose_screen_shows_a_blue_picture_is_not_asked():
    # the generator names it blue (49 % of its pixels); green and white hold 24 % and 23 %
    assert _colors(387, QuestionRules()) == {1977657: "blue"}
    assert _colors(387, mcot_rules(None)) == {}


def test_a_white_frisbee_is_still_asked():
    # control: white on 76 % of its pixels, no other name on 15 %
    assert _colors(625, mcot_rules(None)) == {603975: "white"}


def test_achromatic_shading_is_not_a_second_colour():
    assert second_color("white", {"white", "gray"}) is None
    assert second_color("black", {"black", "gray"}) is None
    assert second_color("gray", {"gray", "white", "black"}) is None
    assert second_color("white", {"white", "black"}) == "black"
    assert second_color("blue", {"blue", "gray"}) == "gray"
