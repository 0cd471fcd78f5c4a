"""Issue 32 item 1: builds reject before paying, never fill a hole twice, and measure their stages,
with the same bits as the whole-image computations they replace."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from mmfaith.builders.coco_source import CocoSource
from mmfaith.builders.edits import dilate
from mmfaith.builders.gates import FILL_FLAT_RING, FILL_INNER_MARGIN, FILL_MIN_PIXELS, FILL_RING, fill_texture_ratio
from mmfaith.builders.inpainters import HoleCache, InpainterSpec
from mmfaith.builders.spd_faith.build import BuildRequest, build_spd_faith
from mmfaith.builders.stage_clock import STAGES
from mmfaith.builders.targets import MAX_BOX_OCCLUSION, MIN_BOX_FILL, SUPPORT_INSIDE, box_mask, movable_reason
from mmfaith.images import read_rgb


def _whole_image_dilate(mask: np.ndarray, radius: int) -> np.ndarray:
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
    return cv2.dilate(mask.astype(np.uint8), kernel).astype(bool)


def _random_masks(count: int, seed: int = 0) -> list[np.ndarray]:
    """Ellipses of every size, some cut by the border, on a 96x128 canvas."""
    rng = np.random.default_rng(seed)
    masks = []
    for _ in range(count):
        canvas = np.zeros((96, 128), dtype=np.uint8)
        centre = (int(rng.integers(-10, 138)), int(rng.integers(-10, 106)))
        axes = (int(rng.integers(1, 50)), int(rng.integers(1, 40)))
        cv2.ellipse(canvas, centre, axes, float(rng.integers(0, 180)), 0, 360, 1, -1)
        masks.append(canvas.astype(bool))
    return masks


def test_box_limited_dilate_is_the_whole_image_dilate() -> None:
    for number, mask in enumerate(_random_masks(120)):
        radius = 1 + number % 14
        assert np.array_equal(dilate(mask, radius), _whole_image_dilate(mask, radius)), (number, radius)
    assert not dilate(np.zeros((5, 5), dtype=bool), 3).any()


def _whole_image_fill_ratio(edited: np.ndarray, hole: np.ndarray) -> float | None:
    """gates.fill_texture_ratio's definition, computed over the whole image."""
    inner = ~_whole_image_dilate(~hole, FILL_INNER_MARGIN)
    if int(inner.sum()) < FILL_MIN_PIXELS:
        return None
    ring = _whole_image_dilate(hole, FILL_RING) & ~hole
    luma = cv2.cvtColor(edited, cv2.COLOR_RGB2GRAY).astype(np.float32)
    magnitude = np.hypot(cv2.Sobel(luma, cv2.CV_32F, 1, 0, ksize=3), cv2.Sobel(luma, cv2.CV_32F, 0, 1, ksize=3))
    surround = float(magnitude[ring].mean()) if ring.any() else 0.0
    if surround < FILL_FLAT_RING:
        return None
    return round(float(magnitude[inner].mean()) / surround, 3)


def test_fill_gate_on_the_holes_box_equals_the_whole_image(sample) -> None:
    source = CocoSource(*sample)
    rgb = read_rgb(source.scene(source.image_ids()[0]).path, 10**8)
    judged = 0
    for mask in _random_masks(60, seed=1):
        hole = cv2.resize(mask.astype(np.uint8), (rgb.shape[1], rgb.shape[0]),
                          interpolation=cv2.INTER_NEAREST).astype(bool)
        expected = _whole_image_fill_ratio(rgb, hole)
        assert fill_texture_ratio(rgb, hole) == expected
        judged += expected is not None
    assert judged > 20  # most holes are judged, so the figures themselves are compared


def _whole_image_movable_reason(ann_id: int, masks: dict[int, np.ndarray], boxes: dict[int, Any],
                                crowd: frozenset[int]) -> str | None:
    """targets.movable_reason's definition with whole-image box masks (its implementation before issue 32)."""
    if ann_id in crowd:
        return "crowd annotation"
    mask = masks[ann_id]
    box = box_mask(boxes[ann_id], *mask.shape)
    box_area = float(box.sum())
    if box_area == 0:
        return "empty box"
    others = np.zeros_like(mask)
    for other_id, other in masks.items():
        if other_id == ann_id:
            continue
        other_area = float(other.sum())
        _, _, ow, oh = boxes[other_id]
        if other_area and ow * oh < box_area and float((other & box).sum()) >= SUPPORT_INSIDE * other_area:
            return f"supports annotation {other_id}: {SUPPORT_INSIDE:.0%} or more of its mask lies inside this box"
        others |= other
    fill = float((mask & box).sum()) / box_area
    if fill < MIN_BOX_FILL:
        return f"partly hidden: its mask fills {fill:.2f} of its box (< {MIN_BOX_FILL})"
    occluded = float((others & box & ~mask).sum()) / box_area
    if occluded > MAX_BOX_OCCLUSION:
        return f"partly hidden: other objects cover {occluded:.2f} of its box (> {MAX_BOX_OCCLUSION})"
    return None


def test_movable_reason_on_the_box_equals_the_whole_image(sample) -> None:
    source = CocoSource(*sample)
    reasons = set()
    for image_id in source.image_ids():
        scene = source.scene(image_id)
        masks = {inst.ann_id: inst.mask(scene.height, scene.width) for inst in scene.instances}
        boxes = {inst.ann_id: inst.bbox for inst in scene.instances}
        crowd = frozenset(inst.ann_id for inst in scene.instances if inst.iscrowd)
        for ann_id in masks:
            expected = _whole_image_movable_reason(ann_id, masks, boxes, crowd)
            assert movable_reason(ann_id, masks, boxes, crowd) == expected
            reasons.add((expected or "movable").split(":")[0].split(" ")[0])
    assert {"movable", "supports", "partly"} <= reasons  # every branch was compared


class _Refusing:
    """An inpainter with Telea's provenance that must never be asked to fill (the cache must answer)."""

    name = "telea"
    deterministic = True

    def fill(self, rgb: np.ndarray, hole: np.ndarray) -> np.ndarray:
        raise AssertionError("the hole was filled again")

    def provenance(self) -> dict[str, Any]:
        return InpainterSpec("telea").build().provenance()


def test_a_hole_is_filled_once_across_workers_and_read_back_identical(sample, tmp_path: Path) -> None:
    source = CocoSource(*sample)
    scene = source.scene(source.image_ids()[0])
    rgb = read_rgb(scene.path, 10**8)
    hole = dilate(scene.instances[0].mask(scene.height, scene.width), 7)
    folder = tmp_path / "holes"
    first = HoleCache(InpainterSpec("telea").build(), folder).fill(rgb, hole)
    assert np.array_equal(first, InpainterSpec("telea").build().fill(rgb, hole))
    assert len(list(folder.iterdir())) == 1
    # Another worker's cache over the same folder answers from the file, with the same bytes.
    again = HoleCache(_Refusing(), folder).fill(rgb.copy(), hole.copy())
    assert np.array_equal(first, again)
    # Other pixels (an earlier edit of a multi-edit pair) are another hole: filled, not read back.
    changed = rgb.copy()
    changed[0, 0] ^= 1
    with pytest.raises(AssertionError, match="filled again"):
        HoleCache(_Refusing(), folder).fill(changed, hole)


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != "build.json"}


def test_cheap_checks_first_keep_every_file_the_same_across_workers(tmp_path: Path) -> None:
    # The worker sees the pairs made when its slot was handed out, the driver every earlier one: a
    # duplicate must be the same rejection line either way, so --workers 1 and 2 give the same files.
    runs = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        build_spd_faith(BuildRequest(out=out, paper_mix=40, seed=0, progress=False, workers=workers,
                                     inpainter=InpainterSpec("telea")))
        runs[workers] = _files(out)
    assert runs[1] == runs[2]
    assert not any(name.startswith(".staging") for name in runs[1])  # the hole cache is gone
    rejected = [json.loads(line) for line in runs[1]["rejected.jsonl"].decode().splitlines()]
    stages = {r["stage"] for r in rejected}
    assert {"plan", "duplicate", "gate"} <= stages
    for rejection in rejected:
        if rejection["stage"] == "gate" and "stopped_at_edit" in rejection["gates"]:
            stopped = rejection["gates"]["stopped_at_edit"]
            assert stopped < len(rejection["plan"]) - 1  # stopped before its last edit
            assert all(v is None for i, v in enumerate(rejection["gates"]["delta_e"]) if i != stopped)

    build = json.loads((tmp_path / "w2" / "build.json").read_text())
    seconds = build["cpu_seconds"]
    assert set(seconds["accepted"]) == set(seconds["rejected"]) == set(STAGES)
    assert seconds["accepted"]["encode"] > 0 and seconds["rejected"]["plan"] > 0
    total = sum(seconds["accepted"].values()) + sum(seconds["rejected"].values())
    assert seconds["rejected_share"] == pytest.approx(sum(seconds["rejected"].values()) / total, abs=1e-3)
