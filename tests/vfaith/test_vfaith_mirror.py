"""Issue 29: a VFaith relation is flipped by mirroring the photo (offline.MIRROR) where it may be.

Most moves the audit saw were refused or rejected (a pasted object floating, a smear where it stood), so no relation
pair was made at all. Mirroring swaps every left/right relation and paints nothing; a scene holding a kind of
object that usually carries writing (offline.MIRROR_REFUSED) is not mirrored, nor one whose objects are not seen
whole. Cases: COCO 490 cropped (tests/fixtures/mirror_dog, instances.json says how) and the embedded sample.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mmfaith.builders.coco_source import CocoSource
from mmfaith.builders.inpainters import InpainterSpec
from mmfaith.builders.targets import TargetRules
from mmfaith.builders.vfaith.offline import MIRROR_REFUSED, OfflineSettings, QuestionOutcome, make_image_pairs
from mmfaith.images import read_rgb, rgb_from_bytes

MIRROR_DOG = Path(__file__).resolve().parents[1] / "fixtures" / "mirror_dog"


def _relations(source: CocoSource, image_id: int) -> dict[str, QuestionOutcome]:
    settings = OfflineSettings(seed=0, templates=("relation",), per_image=9, dilation=7, blend_radius=3,
                               min_delta_e=12.0, min_fill_texture=0.3, max_pixels=10**8,
                               inpainter=InpainterSpec("patchmatch"), dataset="mmfaith-coco-sample", split="train2017",
                               version="test", targets=TargetRules("patchmatch"))
    return {o.key: o for o in make_image_pairs(source.scene(image_id), settings, frozenset(), None).outcomes}


def test_a_relation_is_flipped_by_mirroring_the_photo() -> None:
    # COCO 490: a dog and a skateboard leaning on a wall, no writing anywhere. The photo mirrored puts the dog on the
    # other side of the skateboard; nothing is inpainted (moving the dog would paste it onto the wall's shadow).
    source = CocoSource(MIRROR_DOG / "instances.json", MIRROR_DOG / "train2017")
    outcome = _relations(source, 490)["relation:490:12348+640615"]
    record = outcome.record
    assert record is not None, outcome.rejection
    assert record["edit"]["operation"] == "mirror" and record["build"]["inpainter"] is None
    facts, edited = record["build"]["facts"], record["build"]["facts_edited"]
    assert {facts["relation"], edited["relation"]} == {"left", "right"}
    assert record["options"][[o["label"] for o in record["options"]].index(record["answer_edited"])]["text"] == \
        edited["relation"]
    photo = read_rgb(source.scene(490).path, 10**8)
    assert np.array_equal(rgb_from_bytes(outcome.edited_png, "edited"), photo[:, ::-1])
    assert record["build"]["gates"]["outside_changed_pixels"] == 0


def test_a_scene_with_writing_is_not_mirrored(sample) -> None:
    # Audit: COCO 283 mirrored showed its wine bottle's label backwards (rejected); 127 holds a book, 89 a microwave.
    source = CocoSource(*sample)
    for image_id in (283, 127, 89):
        written = {inst.category for inst in source.scene(image_id).instances} & MIRROR_REFUSED
        outcomes = _relations(source, image_id)
        assert written and outcomes
        for outcome in outcomes.values():
            assert outcome.record is None and "whose writing would read backwards" in outcome.rejection["reason"]
