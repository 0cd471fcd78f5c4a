"""Masks that keep the answer (issue 29's CRM audit): segment outlines and reflections (builders/crm/variants.py)."""
from __future__ import annotations

import pytest

from mmfaith.builders.coco_questions import CategoryContext, QuestionRules, scene_questions
from mmfaith.builders.coco_source import CocoSource, embedded_sample
from mmfaith.builders.crm.sources import Candidate, question_candidate
from mmfaith.builders.crm.variants import MaskSettings, make_item
from mmfaith.images import read_rgb


LEAK_RULES = QuestionRules(one_color_only=True)


@pytest.fixture(scope="module")
def candidates() -> dict[str, Candidate]:
    # Every question of every image by CRM's colour rule, without its usually-small and whole-object rules (a bottle,
    # a broccoli, the oven of COCO 338: CRM no longer asks about them, yet their masks are what the looked-at leaks
    # below were seen on; the gates still guard any other source): the mask gates are tested on those items.
    source = CocoSource(*embedded_sample())
    context = CategoryContext(source)
    found = {}
    for image_id in source.image_ids():
        scene = source.scene(image_id)
        for question in scene_questions(scene, read_rgb(scene.path), 0, rules=LEAK_RULES,
                                        absent=context.plausible_absent(scene)):
            found[f"coco:{question.key}"] = question_candidate(question, scene, source)
    return found


def _one(candidates: dict[str, Candidate], prefix: str) -> Candidate:
    return next(c for key, c in sorted(candidates.items()) if key.startswith(prefix))


@pytest.mark.parametrize("prefix", ["coco:count:49:", "coco:relation:338:", "coco:existence:49:56407"])
def test_segment_masks_are_refused_where_the_outline_names_the_answer(candidates, prefix: str) -> None:
    # Looked at by eye: two rearing-horse silhouettes show "2 horses" and "yes, horses"; a relation's silhouettes
    # show which object stands where (COCO 338's clock above the oven; 164's relation is no longer asked since
    # the nameability rules refuse its oven). Box masks of the same items are made.
    candidate = _one(candidates, prefix)
    refused = make_item(candidate, MaskSettings(shape="segment", styles=("black",)))
    assert refused.record is None and refused.rejection["stage"] == "mask_shape"
    assert "keeps the object's outline" in refused.rejection["reason"]
    assert make_item(candidate, MaskSettings(shape="box", styles=("black",), modes=("specific",))).record is not None


@pytest.mark.parametrize("prefix", ["coco:color:92:", "coco:existence:49:absent:"])
def test_segment_masks_stay_for_colour_and_absent_objects(candidates, prefix: str) -> None:
    # A black silhouette hides a colour (the brown cake of COCO 92: no vase is asked its colour since issue 29); an
    # absent object's mask covers its anchor, not the answer.
    outcome = make_item(_one(candidates, prefix), MaskSettings(shape="segment", styles=("black",), modes=("specific",)))
    assert outcome.record is not None and outcome.record["variants"][0]["mask_shape"] == "segment"


def test_a_reflection_left_visible_rejects_the_item(candidates) -> None:
    # COCO 283: masking the bottle on the glass table leaves its full reflection (looked at by eye); the wine
    # glass beside it reflects too. Every template about them is refused, in box and segment shape alike.
    for key in ("coco:existence:283:89091", "coco:relation:283:89091+665916"):
        outcome = make_item(candidates[key], MaskSettings(styles=("black",), modes=("specific",)))
        assert outcome.record is None and outcome.rejection["stage"] == "mask_leak"
        assert "mirror image stays visible below it" in outcome.rejection["reason"]
    kept = make_item(candidates["coco:count:49:56407+58884"], MaskSettings(styles=("black",), modes=("specific",)))
    assert kept.record is not None and kept.record["build"]["gates"]["mirror_score"] < 0.5


def test_blur_that_keeps_a_telling_colour_rejects_the_item(candidates) -> None:
    # Issue 29's audit, looked at by eye: blurred, the broccoli of COCO 370 stays a green blob in the child's
    # hand (chroma distance 27 from its surroundings); mean hides it. The white vase of COCO 30 blurs into a pale
    # patch like the rail and garden around it (distance under 1).
    broccoli = candidates["coco:count:370:1060727"]
    blurred = make_item(broccoli, MaskSettings(styles=("blur",), modes=("specific",)))
    assert blurred.record is None and blurred.rejection["stage"] == "mask_leak"
    assert "blur keeps a colour standing out from its surroundings" in blurred.rejection["reason"]
    assert make_item(broccoli, MaskSettings(styles=("mean",), modes=("specific",))).record is not None
    vase = candidates["coco:count:30:1155486"]
    assert make_item(vase, MaskSettings(styles=("blur",), modes=("specific",))).record is not None
