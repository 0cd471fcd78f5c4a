"""The fixed rules of the SPD-Faith builder: difficulty tiers, quotas, color vocabulary, recoloring."""
from __future__ import annotations

import numpy as np
import pytest

from mmfaith.builders.coco_source import CocoSource
from mmfaith.builders.colors import COLOR_PROTOTYPES_RGB, name_lab, name_object_color, rgb_to_lab
from mmfaith.builders.edits import edit_color
from mmfaith.builders.recolour import ObjectPaint
from mmfaith.builders.gates import mean_delta_e
from mmfaith.builders.spd_faith.planning import difficulty
from mmfaith.builders.spd_faith.quotas import largest_remainder, make_quotas
from mmfaith.images import read_rgb


def test_difficulty_rule_boundaries() -> None:
    # easy: n <= 6 and a >= 0.01; hard: n >= 17 and a < 0.05; medium otherwise (docs/spd_faith_build.md).
    assert difficulty(6, 0.01) == "easy"
    assert difficulty(6, 0.0099) == "medium"
    assert difficulty(7, 0.5) == "medium"
    assert difficulty(17, 0.0499) == "hard"
    assert difficulty(17, 0.05) == "medium"
    assert difficulty(38, 0.002) == "hard"


def test_paper_mix_counts_by_hand() -> None:
    # N = 30: single = round(30 * 2/3) = 20 -> easy/medium/hard 10/50/40% = 2/10/8 exactly.
    # multi = 10 -> raw 1.87, 2.75, 2.69, 2.69 -> floors 1,2,2,2 (7); the 3 left go to the largest
    # remainders .87 (k=2), .75 (k=3), .69 (k=4, the earlier of the tie) -> 2, 3, 3, 2.
    quotas = {q.key: q.count for q in make_quotas(0, 0, 30, 0)}
    assert quotas == {"single/easy": 2, "single/medium": 10, "single/hard": 8,
                      "multi/2": 2, "multi/3": 3, "multi/4": 3, "multi/5": 2}
    assert largest_remainder(7, {"a": 1, "b": 1, "c": 1}) == {"a": 3, "b": 2, "c": 2}


def test_per_tier_and_multi_counts() -> None:
    quotas = {q.key: q.count for q in make_quotas(3, 6, None, 2)}
    # 6 multi pairs over 4 sizes: 1.5 each -> 1,1,1,1 and the 2 left to the earliest keys (2 and 3).
    assert quotas == {"single/easy": 3, "single/medium": 3, "single/hard": 3,
                      "multi/2": 2, "multi/3": 2, "multi/4": 1, "multi/5": 1, "control/0": 2}


def test_prototypes_name_themselves() -> None:
    for name, rgb in COLOR_PROTOTYPES_RGB.items():
        assert name_lab(rgb_to_lab(np.array(rgb, dtype=np.uint8))) == name


def _objects_of_color(sample, name: str):
    """Every real COCO object of the embedded sample named `name` (masks of 2,000 pixels or more), in order."""
    source = CocoSource(*sample)
    for image_id in source.image_ids():
        scene = source.scene(image_id)
        rgb = read_rgb(scene.path)
        for inst in scene.editable:
            mask = inst.mask(scene.height, scene.width)
            if mask.sum() >= 2000 and name_object_color(rgb, mask) == name:
                yield rgb, mask, inst


@pytest.mark.parametrize("before", ["white", "black", "gray"])
def test_achromatic_objects_change_visibly_and_keep_shading(sample, before: str) -> None:
    # The first such object with a target it can take naturally (builders/recolour.py refuses the others: a
    # near-black object is never lightened, a dark "yellow" reads olive), and those targets.
    candidates = ((rgb, mask, [t for t in ("red", "blue", "yellow", "green") if ObjectPaint(rgb, mask).refusal(t) is None])
                  for rgb, mask, _ in _objects_of_color(sample, before))
    rgb, mask, targets = next((c for c in candidates if c[2]), (None, None, []))
    assert targets, f"no {before} object of the sample takes any of the targets"
    for target in targets:
        outcome = edit_color(rgb, mask, target)
        assert mean_delta_e(rgb, outcome.image, mask) >= 12.0
        assert name_object_color(outcome.image, mask) == target
        # Shading kept: the lightness pattern over the object's own pixels (its refined outline) stays strongly
        # correlated.
        light_before = rgb_to_lab(rgb[outcome.evidence])[:, 0]
        light_after = rgb_to_lab(outcome.image[outcome.evidence])[:, 0]
        assert np.corrcoef(light_before, light_after)[0, 1] > 0.8
        # Nothing changes outside the edit's region (the refined outline and its soft edge, builders/recolour.py).
        assert np.array_equal(outcome.image[~outcome.allowed], rgb[~outcome.allowed])


def test_recolor_to_own_color_is_nearly_invisible(sample) -> None:
    rgb, mask, _ = next(_objects_of_color(sample, "black"))
    assert mean_delta_e(rgb, edit_color(rgb, mask, "black").image, mask) < 12.0


def test_polygon_and_rle_masks_decode_as_pycocotools_does(sample) -> None:
    # Every mask equals pycocotools' own COCO.annToMask, pixel for pixel, for polygons and for crowd
    # RLE alike; polygons also match COCO's stored `area` within 10% (rasterisation at pixel
    # centres; a crowd region's stored area is not its RLE's: 11750 vs 10513 pixels for one here).
    source = CocoSource(*sample)
    kinds = set()
    for image_id in source.image_ids():
        scene = source.scene(image_id)
        for inst in scene.instances:
            kind = "polygon" if isinstance(inst.segmentation, list) else "rle"
            kinds.add(kind)
            decoded = inst.mask(scene.height, scene.width)
            assert decoded.dtype == bool
            assert np.array_equal(decoded, source.coco.annToMask(source.coco.anns[inst.ann_id]).astype(bool))
            area = source.coco.anns[inst.ann_id]["area"]
            if kind == "polygon" and area >= 500:
                assert abs(int(decoded.sum()) - area) <= 0.1 * area, (image_id, inst.ann_id)
    assert kinds == {"polygon", "rle"}
