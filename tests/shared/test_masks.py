"""The shared masking operation (builders/masks.py): every style pixel-exact, placement and gates."""
from __future__ import annotations

import numpy as np
import pytest

from mmfaith.builders.coco_source import CocoSource, embedded_sample
from mmfaith.builders.masks import (MASK_STYLES, MaskRegion, apply_mask, blocks, blurred, check_apart, check_covers,
                                    check_outside_unchanged, mask_union, mean_color, pixel_box, random_boxes,
                                    segment_region)
from mmfaith.images import read_rgb


def _image(height: int = 60, width: int = 80, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)


def test_pixel_box_covers_every_touched_pixel_and_clips() -> None:
    # [10.2, 5.5, 3.1, 2.0] touches columns 10..13 (10.2 to 13.3) and rows 5..7 (5.5 to 7.5).
    assert pixel_box([10.2, 5.5, 3.1, 2.0], 80, 60).xywh() == [10, 5, 4, 3]
    assert pixel_box([-4, 58.5, 10, 10], 80, 60).xywh() == [0, 58, 6, 2]
    with pytest.raises(ValueError):
        pixel_box([90, 10, 5, 5], 80, 60)


@pytest.mark.parametrize("style,fill", [("black", (0, 0, 0)), ("gray", (128, 128, 128))])
def test_constant_styles_are_pixel_exact(style: str, fill: tuple[int, int, int]) -> None:
    rgb = _image()
    regions = [MaskRegion(5, 6, 20, 16), MaskRegion(15, 10, 30, 40)]
    masked = apply_mask(rgb, regions, style)
    expected = rgb.copy()
    expected[6:16, 5:20] = fill
    expected[10:40, 15:30] = fill
    assert np.array_equal(masked, expected)


def test_mean_style_is_the_whole_images_rounded_mean() -> None:
    # A 2x2 image of known pixels: channel means 2.5 -> 2 (half to even), 3.5 -> 4, 100 -> 100.
    rgb = np.array([[[0, 0, 100], [5, 7, 100]], [[2, 3, 100], [3, 4, 100]]], dtype=np.uint8)
    assert mean_color(rgb) == (2, 4, 100)
    masked = apply_mask(rgb, [MaskRegion(1, 0, 2, 2)], "mean")
    expected = rgb.copy()
    expected[:, 1] = (2, 4, 100)
    assert np.array_equal(masked, expected)


def test_noise_style_follows_its_seeded_draw_contract() -> None:
    rgb = _image()
    regions = [MaskRegion(0, 0, 10, 5), MaskRegion(30, 20, 34, 30)]
    masked = apply_mask(rgb, regions, "noise", seed=11)
    rng = np.random.default_rng(11)
    expected = rgb.copy()
    expected[0:5, 0:10] = rng.integers(0, 256, size=(5, 10, 3), dtype=np.uint8)
    expected[20:30, 30:34] = rng.integers(0, 256, size=(10, 4, 3), dtype=np.uint8)
    assert np.array_equal(masked, expected)
    assert np.array_equal(apply_mask(rgb, regions, "noise", seed=11), masked)
    assert not np.array_equal(apply_mask(rgb, regions, "noise", seed=12), masked)


def test_blur_keeps_a_flat_region_exactly_and_touches_nothing_outside() -> None:
    rgb = _image()
    rgb[10:30, 20:60] = (40, 90, 200)
    masked = apply_mask(rgb, [MaskRegion(20, 10, 60, 30)], "blur")
    assert np.array_equal(masked, rgb)  # a flat rectangle blurred from its own pixels stays flat


def test_blur_erases_patterns_up_to_half_the_side() -> None:
    """The stated rule: stripes of any period up to half the side leave at most a smooth ramp.

    Before, the stripes swing 255 levels; |sinc|^3 <= 0.0104 bounds what is left of them at about
    2.7 levels. What else remains is a ramp (the reflected border makes the two ends of the region
    differ), which a cubic in x absorbs; the residual from that cubic is the pattern's trace.
    """
    height, width = 64, 96
    columns = np.arange(width)
    for period_x in (4, 7, 12, 24, 48):  # 48 = half of the 96 px side
        stripes = np.where((columns // (period_x / 2)).astype(int) % 2 == 0, 255, 0).astype(np.uint8)
        rgb = np.repeat(np.repeat(stripes[None, :, None], height, axis=0), 3, axis=2)
        row = blurred(rgb)[height // 2, :, 0].astype(float)
        ramp = np.polyval(np.polyfit(columns, row, 3), columns)
        assert np.abs(row - ramp).max() <= 3.0, period_x


def test_blur_of_an_object_leaves_no_edges() -> None:
    """A real COCO object under the blur style: its mean |second difference| (edges, texture) drops
    below 5 % of before (0.33 of 13.1 on this image: what is left is the rounding of a smooth ramp,
    whose quantised second differences are 0 or 1)."""
    annotations, images = embedded_sample()
    source = CocoSource(annotations, images)
    scene = source.scene(source.image_ids()[0])
    rgb = read_rgb(scene.path)
    instance = max(scene.editable, key=lambda inst: inst.bbox[2] * inst.bbox[3])
    region = pixel_box(instance.bbox, scene.width, scene.height)
    masked = apply_mask(rgb, [region], "blur")
    crop = (slice(region.y0, region.y1), slice(region.x0, region.x1))
    before = np.abs(np.diff(rgb[crop].astype(np.int16), 2, axis=1)).mean()
    after = np.abs(np.diff(masked[crop].astype(np.int16), 2, axis=1)).mean()
    assert after < 0.05 * before


@pytest.mark.parametrize("style", MASK_STYLES)
def test_segment_masks_change_exactly_the_segment(style: str) -> None:
    rgb = _image()
    segment = np.zeros((60, 80), dtype=bool)
    segment[10:30, 10:30] = np.tri(20, dtype=bool)  # a triangle: the rectangle's other half must stay
    region = segment_region(segment)
    assert region.xywh() == [10, 10, 20, 20]
    masked = apply_mask(rgb, [region], style, seed=3)
    assert check_outside_unchanged(rgb, masked, [region]) is None
    assert np.array_equal(masked[~segment], rgb[~segment])
    if style in ("black", "gray"):
        assert np.all(masked[segment] == {"black": 0, "gray": 128}[style])


@pytest.mark.parametrize("style", MASK_STYLES)
def test_gates_pass_a_mask_and_catch_a_stray_pixel(style: str) -> None:
    rgb = _image()
    evidence = [pixel_box([12.5, 7.2, 20, 11], 80, 60)]
    masked = apply_mask(rgb, evidence, style, seed=1)
    assert check_outside_unchanged(rgb, masked, evidence) is None
    assert check_covers(evidence, evidence, 60, 80) is None
    masked[0, 0] = rgb[0, 0] ^ 1  # one level off in every channel
    assert check_outside_unchanged(rgb, masked, evidence) == "1 pixels outside the mask changed (by up to 1)"
    # The evidence's pixel box is columns 12..32, rows 7..18 (21 x 12); a mask one pixel short on the
    # left and top leaves column 12 (12 pixels) and row 7 (21 pixels) visible, 12 + 21 - 1 = 32.
    assert evidence[0].xywh() == [12, 7, 21, 12]
    smaller = [MaskRegion(13, 8, 33, 19)]
    assert check_covers(smaller, evidence, 60, 80) == "evidence region 0 has 32 pixels the mask leaves visible"


def test_random_boxes_keep_sizes_avoid_evidence_and_each_other() -> None:
    evidence = [MaskRegion(10, 10, 40, 30), MaskRegion(100, 50, 120, 90), MaskRegion(30, 20, 60, 60)]
    for seed in range(200):
        placement = random_boxes(evidence, 200, 150, np.random.default_rng(seed), margin=8)
        assert placement.regions is not None, placement.reason
        assert [(r.width, r.height) for r in placement.regions] == [(30, 20), (20, 40), (30, 40)]
        assert check_apart(placement.regions, evidence, 8) is None
        union = mask_union(placement.regions, 150, 200)
        grown = mask_union([MaskRegion(r.x0 - 8, r.y0 - 8, r.x1 + 8, r.y1 + 8) for r in evidence], 150, 200)
        assert not (union & grown).any()
        assert all(0 <= r.x0 and r.x1 <= 200 and 0 <= r.y0 and r.y1 <= 150 for r in placement.regions)
    again = random_boxes(evidence, 200, 150, np.random.default_rng(5), margin=8)
    assert again == random_boxes(evidence, 200, 150, np.random.default_rng(5), margin=8)


def test_random_boxes_keep_a_segment_shape() -> None:
    shape = np.tri(6, 8, dtype=bool)
    placement = random_boxes([MaskRegion(0, 0, 8, 6, shape)], 60, 40, np.random.default_rng(0))
    assert placement.regions is not None and placement.regions[0].shape is shape


def test_random_boxes_reject_with_a_reason_after_bounded_tries() -> None:
    # Evidence covering most of a 100x100 image leaves no room for a 60x60 box.
    placement = random_boxes([MaskRegion(20, 20, 80, 80)], 100, 100, np.random.default_rng(0), max_tries=50)
    assert placement.regions is None and placement.tries == 50
    assert placement.reason == ("no place for a 60x60 box outside the evidence (margin 8 px) and the other boxes "
                                "after 50 tries")
    too_big = random_boxes([MaskRegion(0, 0, 120, 10)], 100, 100, np.random.default_rng(0))
    assert too_big.reason == "a 120x10 box does not fit in the image"


@pytest.mark.parametrize("ratio", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_blocks_mask_the_stated_share(ratio: float) -> None:
    chosen = blocks(640, 480, ratio, np.random.default_rng(0))
    assert len(chosen) == round(ratio * 64)
    share = mask_union(chosen, 480, 640).mean()
    assert share == pytest.approx(ratio)  # 640 and 480 divide by 8: the blocks are exactly 80x60
    assert chosen == blocks(640, 480, ratio, np.random.default_rng(0))
