"""Issue 29, round 7 of VFaith's audit: the rules the audit's rejects asked for, each on held-out embedded images.

The rejects were seen on the 128-image sample (docs/audit.md, VFaith, round 7); these cases are other images of the
embedded sample (or test fixtures) that the same rules must decide: a surface asked its colour unless it spans the
photo (113, with and without slivers at both edges), SPD-Faith's recolour and removal refusals (89's microwave, 294's
microwave), no recoloured food (92's cake) nor gripped thing (446's remote), no count of pieces (370's broccoli), no
move (every relation of the sample is mirrored or refused), writing too small to read (490 with a phone-sized
annotation added), and the crop's new refusals (a mounted clock in 294 and 338, a bowl in 643, a motorcycle under its
rider in 86 without its handbag, and a pickup beside "no car", as relabelled annotations of 260).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mmfaith.builders.coco_questions import QuestionRules, scene_questions
from mmfaith.builders.coco_source import CocoSource, Scene
from mmfaith.builders.inpainters import InpainterSpec
from mmfaith.builders.scene_view import SceneView
from mmfaith.builders.targets import TargetRules
from mmfaith.builders.vfaith.offline import QUESTION_RULES, OfflineSettings, QuestionOutcome, make_image_pairs
from mmfaith.builders.vfaith.reframe import Crop, crop_out
from mmfaith.images import read_rgb

CARRIED = Path(__file__).resolve().parents[1] / "fixtures" / "carried_86"
"""COCO 86 at half size (a motorcycle, its rider and the handbag hanging on it), every annotation scaled."""
MIRROR_DOG = Path(__file__).resolve().parents[1] / "fixtures" / "mirror_dog"
"""COCO 490 cropped (a dog and a skateboard by a wall, no writing): tests/vfaith/test_vfaith_mirror.py."""


@pytest.fixture(scope="module")
def source(sample) -> CocoSource:
    return CocoSource(*sample)


def _outcomes(scene: Scene, templates: tuple[str, ...]) -> dict[str, QuestionOutcome]:
    settings = OfflineSettings(seed=0, templates=templates, per_image=9, dilation=7, blend_radius=3, min_delta_e=12.0,
                               min_fill_texture=0.3, max_pixels=10**8, inpainter=InpainterSpec("patchmatch"),
                               dataset="mmfaith-coco-sample", split="train2017", version="test",
                               targets=TargetRules("patchmatch"))
    return {o.key: o for o in make_image_pairs(scene, settings, frozenset(), None).outcomes}


def _view(scene: Scene) -> SceneView:
    return SceneView(scene, read_rgb(scene.path, 10**8), 7, 3, TargetRules("patchmatch"))


def _relabelled(scene: Scene, ann_id: int, category: str) -> Scene:
    return dataclasses.replace(scene, instances=tuple(
        dataclasses.replace(inst, category=category) if inst.ann_id == ann_id else inst for inst in scene.instances))


def test_a_lone_surface_is_asked_its_colour(source: CocoSource) -> None:
    # COCO 113's wooden table under a cake holds things and fills little of its box: the shared rule asks no colour
    # of it; VFaith's (color_of_surfaces) does, and the recolour judges its outline.
    scene = source.scene(113)
    rgb = read_rgb(scene.path, 10**8)
    asked = {q.key for q in scene_questions(scene, rgb, 0, ("color",), QUESTION_RULES)}
    shared = {q.key for q in scene_questions(scene, rgb, 0, ("color",), QuestionRules(count_holds_one_less=True))}
    assert "color:113:1616846" in asked - shared
    # The same table with two slivers of its outline at the photo's left and right edges runs out of the photo on
    # both sides: the ground of a close-up (the counter of 142, "brown" or "gray"?), not asked.
    table = next(inst for inst in scene.instances if inst.ann_id == 1616846)
    right = scene.width - 3
    slivers = [[0, 630, 3, 630, 3, 633, 0, 633], [right, 630, right + 3, 630, right + 3, 633, right, 633]]
    spanning = dataclasses.replace(table, segmentation=[*table.segmentation, *slivers])
    wide = dataclasses.replace(scene, instances=tuple(spanning if inst is table else inst for inst in scene.instances))
    assert "color:113:1616846" not in {q.key for q in scene_questions(wide, rgb, 0, ("color",), QUESTION_RULES)}


def test_spd_faiths_recolour_refusal_food_and_grips_hold_for_vfaith(source: CocoSource) -> None:
    # Audit: the oven of COCO 138 (dark green, named black), the banana slices of 142 and the frisbee in a dog's mouth
    # in 394 (a purple fringe along the grip) were recoloured and rejected.
    microwave = _outcomes(source.scene(89), ("color",))["color:89:1640626"]
    assert "not recoloured: its colour is its material (microwave)" in microwave.rejection["reason"]
    cake = _outcomes(source.scene(92), ("color",))["color:92:1085306"]
    assert cake.record is None and "not recoloured: food" in cake.rejection["reason"]
    remote = _outcomes(source.scene(446), ("color",))["color:446:1108431"]
    assert remote.record is None and "held by the person" in remote.rejection["reason"]


def test_a_fixture_is_neither_cropped_nor_removed_and_pieces_are_not_counted(source: CocoSource) -> None:
    # Audit: a wall clock inpainted away left its ghost (138); a street clock's post and a mantel clock's stand stayed
    # in frame after the crop (64, 78); seven banana slices were counted as one banana (142).
    microwave = _outcomes(source.scene(294), ("count",))["count:294:1118968"]
    assert "a fixture (microwave)" in microwave.rejection["reason"]
    for image_id, clock in ((294, 2144820), (338, 339566)):
        assert "mounted on a post, stand or arm" in str(crop_out(_view(source.scene(image_id)), clock))
    broccoli = _outcomes(source.scene(370), ("count",))["count:370:1060727"]
    assert broccoli.record is None and "comes in pieces" in broccoli.rejection["reason"]


def test_a_relation_is_only_ever_mirrored(source: CocoSource) -> None:
    # Audit: VFaith's audit accepted no move in any round (a plant moved off its shelf onto the wall of 138, seven
    # times, each with a smear where it stood).
    seen = 0
    for image_id in source.image_ids():
        for outcome in _outcomes(source.scene(image_id), ("relation",)).values():
            seen += 1
            if outcome.record is not None:
                assert outcome.record["edit"]["operation"] == "mirror"
            else:
                assert outcome.rejection["reason"].startswith(("the photo is not mirrored", "mirrored, the"))
    assert seen


def test_a_bowl_a_held_thing_and_a_car_beside_a_pickup_are_not_cropped(source: CocoSource) -> None:
    # Audit: stacked dishes stayed over a cropped colander (486), a birthday cake's candle stayed by the baby eating it
    # (428), a pickup annotated truck stayed behind "no car" (64).
    bowl = next(inst.ann_id for inst in source.scene(643).instances if inst.category == "bowl")
    assert "dishes stack" in str(crop_out(_view(source.scene(643)), bowl))
    # COCO 260's bus is cropped away; called a car beside its small car called a truck, it is not.
    bus_scene = source.scene(260)
    car = next(inst.ann_id for inst in bus_scene.instances if inst.category == "car")
    bus = next(inst.ann_id for inst in bus_scene.instances if inst.category == "bus")
    assert isinstance(crop_out(_view(bus_scene), bus), Crop)
    pickup = _relabelled(_relabelled(bus_scene, bus, "car"), car, "truck")
    assert "a truck is annotated in the photo" in str(crop_out(_view(pickup), bus))
    # COCO 86 (tests/fixtures/carried_86) without its handbag's annotation: the motorcycle's rider would stay.
    carried = CocoSource(CARRIED / "instances.json", CARRIED / "train2017").scene(86)
    unloaded = dataclasses.replace(carried, instances=tuple(i for i in carried.instances if i.category != "handbag"))
    bike = next(inst.ann_id for inst in carried.instances if inst.category == "motorcycle")
    assert "holds or uses it" in str(crop_out(_view(unloaded), bike))


def test_writing_too_small_to_name_does_not_stop_a_mirror() -> None:
    # Audit: COCO 560's bathroom holds a cell phone of 0.04 % of the image, and was never mirrored. COCO 490 (mirrored:
    # tests/fixtures/mirror_dog) with a phone-sized annotation added is still mirrored; with a larger one it is not.
    scene = CocoSource(MIRROR_DOG / "instances.json", MIRROR_DOG / "train2017").scene(490)
    floor = QUESTION_RULES.min_instance_area * scene.width * scene.height
    for side, mirrored in ((int(floor ** 0.5) - 1, True), (int(floor ** 0.5) + 20, False)):
        phone = dataclasses.replace(scene.instances[0], ann_id=1, category="cell phone", bbox=(2.0, 2.0, side, side),
                                    segmentation=[[2, 2, 2 + side, 2, 2 + side, 2 + side, 2, 2 + side]])
        outcome = _outcomes(dataclasses.replace(scene, instances=(*scene.instances, phone)),
                            ("relation",))["relation:490:12348+640615"]
        assert (outcome.record is not None) == mirrored, outcome.rejection
