"""Issue 29: SPD-Faith's own refusals of edit targets (builders/spd_faith/refusals.py), on held-out cases.

The cases (tests/spd_faith/spd_cases/) are eight images of the 128-image COCO sample at half size with their
non-crowd annotations scaled (licenses that allow derivatives; none of them an item of the audit's verdicts
except COCO 389's border-cut backpack, the case that showed the class).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from mmfaith.builders.coco_source import CocoSource
from mmfaith.builders.spd_faith.planning import SceneView
from mmfaith.builders.spd_faith.refusals import recolour_refusal, removal_refusal
from mmfaith.builders.targets import TargetRules
from mmfaith.images import read_rgb

CASES = Path(__file__).resolve().parent / "spd_cases"


@pytest.fixture(scope="module")
def views() -> dict[int, SceneView]:
    source = CocoSource(CASES / "annotations.json", CASES / "train2017")
    views = {}
    for image_id in source.image_ids():
        scene = source.scene(image_id)
        views[image_id] = SceneView(scene, read_rgb(scene.path, 10**8), 7, 3, TargetRules())
    return views


@pytest.mark.parametrize(("image_id", "ann_id", "words"), [
    (294, 470246, "a person"),             # the woman at the kitchen counter
    (49, 198565, "a person"),              # a small person on the lawn
    (164, 331750, "fixture (refrigerator)"),
    (294, 1118968, "fixture (microwave)"),
    (294, 1897919, "held"),                # the spoon in the woman's hand
    (241, 1182447, "held"),                # the handbag on a woman's arm
])
def test_people_fixtures_and_held_things_are_never_removed_or_moved(views, image_id, ann_id, words) -> None:
    reason = removal_refusal(views[image_id], ann_id)
    assert reason is not None and words in reason


@pytest.mark.parametrize(("image_id", "ann_id"), [
    (49, 1609247),    # the planter on the lawn: nobody holds it
    (294, 1897640),   # a spoon on the counter, away from the woman
    (387, 1970089),   # a laptop on a desk
])
def test_free_standing_objects_stay_removable(views, image_id, ann_id) -> None:
    assert removal_refusal(views[image_id], ann_id) is None


@pytest.mark.parametrize(("image_id", "ann_id", "words"), [
    (164, 331750, "material (refrigerator)"),
    (294, 1118968, "material (microwave)"),
    (164, 679713, "material (cup)"),
    (387, 1103403, "teal"),                        # a teal laptop lid
    (387, 1977657, "teal"),                        # a teal phone
    (389, 298628, "teal"),                         # a teal tie
    (389, 1415025, "worn backpack cut by the image border"),
    (328, 1827585, "worn backpack, partly hidden"),
])
def test_appliances_cups_teal_and_cut_worn_things_are_never_recoloured(views, image_id, ann_id, words) -> None:
    reason = recolour_refusal(views[image_id], ann_id)
    assert reason is not None and words in reason


@pytest.mark.parametrize(("image_id", "ann_id"), [
    (241, 1182447),   # a worn handbag, whole in frame
    (315, 287944),    # the green beach umbrella (172 degrees of hue: green, not teal)
    (387, 1970089),   # a gray laptop
])
def test_whole_worn_things_and_plain_colours_stay_recolourable(views, image_id, ann_id) -> None:
    assert recolour_refusal(views[image_id], ann_id) is None


def test_the_planner_asks_the_refusals(views) -> None:
    # The teal tie of COCO 389 has colour targets by the shared rules; SPD-Faith's planner still refuses it.
    view = views[389]
    assert view.color_targets(298628)
    assert "teal" in recolour_refusal(view, 298628)
    assert not view.feasible(298628, "color")
